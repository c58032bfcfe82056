// Package reconcile compares a topic with the table a sink writes it to,
// key by key, for scheduled checks of a sink's table (eosctl reconcile runs
// one): the last line of defence, which finds what no transaction and no
// unique key can — a row deleted or edited in the database, a row written
// wrong, a record that never became a row.
//
// A run reads the topic with read_committed up to a watermark (each
// partition's last stable offset when the run starts), maps each record to
// its row as the sink would (sink.Mapping; the last record of a key is
// the one that counts), and looks the keys up in the table:
//
//   - missing: a key of the topic with no row;
//   - changed: a row whose mapped columns differ from the record's;
//   - extra: a row whose key is in no record of the topic. Only a run
//     that covers every partition from offset 0 can tell, so extras are
//     checked on such runs only (Report.ExtraChecked).
//
// The run is read-only for the table. It stores its watermark, so the next
// run continues where it ended (Config.From reruns a range instead, with
// the same result), and writes its findings to a report table. With
// Config.Repair it re-sends the missing records through the sink's
// idempotent write (sink.WriteRecords), which is safe to run twice; extra
// and changed rows are only reported, never deleted or overwritten.
package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/sink"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors about the configuration itself are *eos.ConfigError.

// Config configures a run.
type Config struct {
	// DSN is the database, as for the sink.
	DSN string
	// Topic is read with read_committed.
	Topic string
	// Mapping maps records to rows, as the sink's.
	Mapping *sink.Mapping
	// ClientOpts reach the Kafka cluster.
	ClientOpts []kgo.Opt
	// StartTimeout bounds the first connection to Kafka: brokers that do
	// not answer within it fail the run with an error naming the likely
	// cause (nothing listening, not a Kafka port, TLS or SASL on one side
	// only); default 10s.
	StartTimeout time.Duration
	// Name keys the stored watermark and the report; default
	// TABLE/TOPIC.
	Name string
	// From, if set, reruns from this offset on every partition instead of
	// continuing from the stored watermark.
	From *int64
	// Repair re-sends the missing records through the sink's idempotent
	// write.
	Repair bool
	// StateTable and ReportTable are created if missing; defaults
	// eos_reconcile_state and eos_reconcile_report.
	StateTable, ReportTable string
	Logger                  *slog.Logger
}

// Finding is one discrepancy.
type Finding struct {
	Kind      string `json:"kind"` // missing, extra, changed
	Key       string `json:"key"`
	Partition int32  `json:"partition,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
	Column    string `json:"column,omitempty"`
	Topic     string `json:"topic_value,omitempty"`
	Table     string `json:"table_value,omitempty"`
}

// Report is a run's result.
type Report struct {
	Name         string                  `json:"name"`
	Topic        string                  `json:"topic"`
	Table        string                  `json:"table"`
	Ranges       []verify.PartitionRange `json:"ranges"` // [start, end) read per partition
	Records      int                     `json:"records"`
	Keys         int                     `json:"keys"`
	Missing      []Finding               `json:"missing"`
	Extra        []Finding               `json:"extra"`
	Changed      []Finding               `json:"changed"`
	ExtraChecked bool                    `json:"extra_checked"`
	Unmappable   int                     `json:"unmappable"` // records the mapping rejects (the sink dead-letters them)
	Repaired     int                     `json:"repaired"`
	Started      time.Time               `json:"started"`
	Finished     time.Time               `json:"finished"`
}

// Clean reports whether the run found no discrepancy.
func (r *Report) Clean() bool { return len(r.Missing)+len(r.Extra)+len(r.Changed) == 0 }

// Summary is the report in one line.
func (r *Report) Summary() string {
	extra := "not checked (run from offset 0 to check)"
	if r.ExtraChecked {
		extra = strconv.Itoa(len(r.Extra))
	}
	var rs []string
	for _, p := range r.Ranges {
		rs = append(rs, fmt.Sprintf("%d:[%d,%d)", p.Partition, p.Start, p.End))
	}
	return fmt.Sprintf("%s: %d records, %d keys of %s %s against table %s: %d missing, %d changed, extra %s; %d repaired",
		r.Name, r.Records, r.Keys, r.Topic, strings.Join(rs, " "), r.Table, len(r.Missing), len(r.Changed), extra, r.Repaired)
}

// expected is the last record of a key.
type expected struct {
	rec  *kgo.Record
	vals []any
}

// Run reconciles once.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Topic == "" || cfg.Mapping == nil || cfg.DSN == "" {
		return nil, eos.BadConfig("reconcile.Config", "DSN, Topic and Mapping are required")
	}
	if cfg.Mapping.Mode == sink.ModeTransition {
		return nil, eos.BadConfig("reconcile.Config", "Mapping: mode transition tables are reconciled by status, which this does not do")
	}
	if cfg.StartTimeout < 0 {
		return nil, eos.BadConfig("reconcile.Config", "StartTimeout must not be negative, got %s", cfg.StartTimeout)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Mapping.Table + "/" + cfg.Topic
	}
	if cfg.StateTable == "" {
		cfg.StateTable = "eos_reconcile_state"
	}
	if cfg.ReportTable == "" {
		cfg.ReportTable = "eos_reconcile_report"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	db, err := sink.Open(cfg.DSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.Ping(ctx, sink.Retry{Attempts: 3}); err != nil {
		return nil, err
	}
	st := &store{db: db, cfg: cfg}
	if err := st.create(ctx); err != nil {
		return nil, err
	}
	rep := &Report{Name: cfg.Name, Topic: cfg.Topic, Table: cfg.Mapping.Table, Started: time.Now().UTC(), Missing: []Finding{}, Extra: []Finding{}, Changed: []Finding{}}

	cl, err := kgo.NewClient(cfg.ClientOpts...)
	if err != nil {
		return nil, eos.BadConfig("reconcile.Config", "kafka client: %w", err)
	}
	// Without this, brokers that never answer surfaced 40s later as the
	// snapshot's raw "read tcp ...: i/o timeout".
	if err := admin.Ping(ctx, cl, cfg.StartTimeout); err != nil {
		cl.Close()
		return nil, err
	}
	snap, err := verify.Snapshot(ctx, kadm.NewClient(cl), cfg.Topic)
	cl.Close()
	if err != nil {
		return nil, err
	}
	marks, err := st.watermarks(ctx)
	if err != nil {
		return nil, err
	}
	rep.ExtraChecked = true
	for i, p := range snap {
		start := p.Start
		switch {
		case cfg.From != nil:
			start = max(start, *cfg.From)
		default:
			if m, ok := marks[p.Partition]; ok {
				start = max(start, m)
			}
		}
		if start != 0 {
			rep.ExtraChecked = false
		}
		snap[i].Start = min(start, p.End)
	}
	rep.Ranges = snap

	want := map[string]*expected{}
	err = verify.ReadRanges(ctx, cfg.ClientOpts, cfg.Topic, snap, func(r *kgo.Record) {
		rep.Records++
		key, vals, err := cfg.Mapping.Row(r)
		if err != nil {
			rep.Unmappable++
			return
		}
		want[text(key)] = &expected{rec: r, vals: vals}
	})
	if err != nil {
		return nil, err
	}
	rep.Keys = len(want)
	if err := st.compare(ctx, want, rep); err != nil {
		return nil, err
	}
	if rep.ExtraChecked {
		if err := st.extras(ctx, want, rep); err != nil {
			return nil, err
		}
	}
	if cfg.Repair && len(rep.Missing) > 0 {
		recs := make([]*kgo.Record, 0, len(rep.Missing))
		for _, f := range rep.Missing {
			recs = append(recs, want[f.Key].rec)
		}
		if rep.Repaired, err = sink.WriteRecords(ctx, db, cfg.Mapping, recs); err != nil {
			return nil, fmt.Errorf("repairing %d missing rows: %w", len(recs), err)
		}
	}
	rep.Finished = time.Now().UTC()
	if err := st.save(ctx, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// text is a value's comparable text: numbers in their shortest exact form,
// bytes as strings, NULL as NULL.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// same compares a topic value with a table value: as text, or as numbers
// when both read as numbers (MySQL returns numbers as text).
func same(topic, table any) bool {
	a, b := text(topic), text(table)
	if a == b {
		return true
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa == fb || (fb != 0 && abs((fa-fb)/fb) < 1e-12)
	}
	if (a == "true" || a == "false") && (b == "1" || b == "0") {
		return (a == "true") == (b == "1")
	}
	return false
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func sortedKeys(m map[string]*expected) []string { return slices.Sorted(maps.Keys(m)) }
