// Package reconcile compares a topic with the table a sink writes it to,
// key by key, for scheduled checks of a sink's table (eosctl reconcile runs
// one): the last line of defence, which finds what no transaction and no
// unique key can — a row deleted or edited in the database, a row written
// wrong, a record that never became a row.
//
// A run judges the topic only up to the sink's own position: the next
// offsets the sink (Config.Group) has committed in its offsets table, read
// in the same database snapshot as the table, so that every row the run
// sees comes from a record below them. Records beyond them, up to the
// topic's last stable offset, are pending (the sink has not committed them
// yet): counted in Report.Pending, never missing, never repaired. Each
// record is mapped as the sink would (sink.Mapping); the record a row is
// compared with is the one the sink keeps: the first record of the key in
// insert mode, the last in upsert mode (per partition, when a key's
// records span partitions: the row must equal one partition's). It
// reports:
//
//   - missing: a key of a judged record with no row;
//   - changed: a row whose mapped columns differ from that record's;
//   - extra: a row whose key is in no judged record. Only a run that
//     covers every partition from offset 0 can tell, so extras are
//     checked on such runs only (Report.ExtraChecked).
//
// Memory is bounded whatever the topic's size: records are spilled to
// temporary files in buckets by a hash of their key (Config.TempDir), and
// one bucket (about 100,000 records) is judged at a time, so every record
// of a key is judged together. Keys are looked up a thousand at a time
// with WHERE key IN (...) in the column's own type, so the key's index is
// used. At most Config.MaxFindings findings of each kind are listed; all
// are counted.
//
// The run is read-only for the table. It stores its watermark (the sink's
// offsets it judged up to), so the next run continues where it ended
// (Config.From reruns a range instead, with the same result), and writes
// its findings to a report table. With Config.Repair it re-sends the
// missing records through the sink's idempotent write (sink.WriteRecords),
// which is safe to run twice; extra and changed rows are only reported,
// never deleted or overwritten.
package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/rangeread"
	"github.com/eosctl/eos/internal/sqldialect"
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
	// Group is the sink's consumer group: its committed offsets, in
	// OffsetsTable, bound what a run judges. Required.
	Group string
	// OffsetsTable is the sink's offsets table (sink.Config.OffsetsTable);
	// default eos_sink_offsets.
	OffsetsTable string
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
	// write. Pending records (beyond the sink's offsets) are never sent.
	Repair bool
	// MaxFindings bounds the findings of each kind listed in the report
	// (and its table); all are counted. Default 10,000.
	MaxFindings int
	// TempDir holds the run's spill files (about the size of the records
	// read, removed when the run ends); default os.TempDir().
	TempDir string
	// StateTable and ReportTable are created if missing; defaults
	// eos_reconcile_state and eos_reconcile_report.
	StateTable, ReportTable string
	Logger                  *slog.Logger

	bucket int // records per spill bucket; default bucketRecords (tests set fewer)
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
	Name  string `json:"name"`
	Topic string `json:"topic"`
	Table string `json:"table"`
	Group string `json:"group"`
	// Ranges were judged: [start, the sink's committed offset) per
	// partition.
	Ranges []verify.PartitionRange `json:"ranges"`
	// Pending are the ranges beyond the sink's committed offsets, up to
	// the topic's last stable offset: not judged (the sink has not
	// committed them), and judged by a later run.
	Pending        []verify.PartitionRange `json:"pending"`
	PendingOffsets int64                   `json:"pending_offsets"`
	Records        int                     `json:"records"`
	Keys           int                     `json:"keys"`
	// Missing, Changed and Extra list at most Config.MaxFindings each;
	// the counts are complete.
	Missing      []Finding `json:"missing"`
	Extra        []Finding `json:"extra"`
	Changed      []Finding `json:"changed"`
	MissingCount int       `json:"missing_count"`
	ChangedCount int       `json:"changed_count"`
	ExtraCount   int       `json:"extra_count"`
	ExtraChecked bool      `json:"extra_checked"`
	Unmappable   int       `json:"unmappable"` // records the mapping rejects (the sink dead-letters them)
	Repaired     int       `json:"repaired"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished"`
}

// Clean reports whether the run found no discrepancy.
func (r *Report) Clean() bool { return r.MissingCount+r.ExtraCount+r.ChangedCount == 0 }

// Summary is the report in one line.
func (r *Report) Summary() string {
	extra := "not checked (run from offset 0 to check)"
	if r.ExtraChecked {
		extra = strconv.Itoa(r.ExtraCount)
	}
	return fmt.Sprintf("%s: %d records, %d keys of %s %s (group %s's committed offsets) against table %s: %d missing, %d changed, extra %s; %d repaired; %d offsets pending %s",
		r.Name, r.Records, r.Keys, r.Topic, spans(r.Ranges), r.Group, r.Table, r.MissingCount, r.ChangedCount, extra, r.Repaired, r.PendingOffsets, spans(r.Pending))
}

func spans(rs []verify.PartitionRange) string {
	b := make([]string, 0, len(rs))
	for _, p := range rs {
		b = append(b, fmt.Sprintf("%d:[%d,%d)", p.Partition, p.Start, p.End))
	}
	return strings.Join(b, " ")
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (cfg *Config) defaults() error {
	if cfg.Topic == "" || cfg.Mapping == nil || cfg.DSN == "" {
		return eos.BadConfig("reconcile.Config", "DSN, Topic and Mapping are required")
	}
	if cfg.Group == "" {
		return eos.BadConfig("reconcile.Config", "Group is required: the sink's consumer group, whose committed offsets bound what is judged")
	}
	if cfg.Mapping.Mode == sink.ModeTransition {
		return eos.BadConfig("reconcile.Config", "Mapping: mode transition tables are reconciled by status, which this does not do")
	}
	if cfg.StartTimeout < 0 {
		return eos.BadConfig("reconcile.Config", "StartTimeout must not be negative, got %s", cfg.StartTimeout)
	}
	if cfg.MaxFindings < 0 {
		return eos.BadConfig("reconcile.Config", "MaxFindings must not be negative, got %d", cfg.MaxFindings)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.bucket == 0 {
		cfg.bucket = bucketRecords
	}
	if cfg.MaxFindings == 0 {
		cfg.MaxFindings = 10_000
	}
	if cfg.OffsetsTable == "" {
		cfg.OffsetsTable = "eos_sink_offsets"
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
	for _, t := range [][2]string{{"OffsetsTable", cfg.OffsetsTable}, {"StateTable", cfg.StateTable}, {"ReportTable", cfg.ReportTable}} {
		if !identRE.MatchString(t[1]) {
			return eos.BadConfig("reconcile.Config", "%s %q is not a plain SQL identifier", t[0], t[1])
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Run reconciles once.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	db, err := sink.Open(cfg.DSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.Ping(ctx, sink.Retry{Attempts: 3}); err != nil {
		return nil, err
	}
	d, err := sqldialect.Of(db.DB)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	st := &store{db: db, d: d, cfg: cfg}
	if err := st.create(ctx); err != nil {
		return nil, err
	}
	rep := &Report{Name: cfg.Name, Topic: cfg.Topic, Table: cfg.Mapping.Table, Group: cfg.Group, Started: time.Now().UTC(),
		Missing: []Finding{}, Extra: []Finding{}, Changed: []Finding{}, Pending: []verify.PartitionRange{}}
	textKeys, err := st.textKeys(ctx)
	if err != nil {
		return nil, err
	}
	marks, err := st.watermarks(ctx)
	if err != nil {
		return nil, err
	}

	cl, err := kgo.NewClient(cfg.ClientOpts...)
	if err != nil {
		return nil, eos.BadConfig("reconcile.Config", "kafka client: %w", err)
	}
	defer cl.Close()
	// Without this, brokers that never answer surfaced 40s later as the
	// snapshot's raw "read tcp ...: i/o timeout".
	if err := admin.Ping(ctx, cl, cfg.StartTimeout); err != nil {
		return nil, err
	}

	q, done, err := st.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	// The sink's offsets first: they take the snapshot, and the topic's
	// last stable offset read after them is at least as far.
	committed, err := st.sinkOffsets(ctx, q)
	if err != nil {
		return nil, err
	}
	snap, err := verify.Snapshot(ctx, kadm.NewClient(cl), cfg.Topic)
	if err != nil {
		return nil, err
	}
	below, total := plan(rep, snap, marks, committed, cfg.From)

	sp, err := newSpill(cfg.TempDir, total, cfg.bucket)
	if err != nil {
		return nil, err
	}
	defer sp.close()
	var spillErr error
	err = read(ctx, cfg, rep.Ranges, func(r *kgo.Record) {
		rep.Records++
		key, vals, err := cfg.Mapping.Row(r)
		if err != nil {
			rep.Unmappable++
			return
		}
		e := &spilled{keyText: text(key), key: key, partition: r.Partition, offset: r.Offset, vals: texts(vals)}
		if cfg.Repair {
			e.rec = r
		}
		if err := sp.addRecord(e); err != nil && spillErr == nil {
			spillErr = fmt.Errorf("reconcile: writing a spill file (Config.TempDir): %w", err)
		}
	})
	if err == nil {
		err = spillErr
	}
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("reconcile: records read and spilled", "records", rep.Records, "unmappable", rep.Unmappable, "buckets", len(sp.files),
		"ranges", spans(rep.Ranges), "pending", spans(rep.Pending))
	if rep.ExtraChecked {
		if err := st.tableKeys(ctx, q, sp.addTableKey); err != nil {
			return nil, err
		}
	}
	if err := sp.flush(); err != nil {
		return nil, err
	}
	j := &judge{st: st, q: q, sp: sp, rep: rep, max: cfg.MaxFindings, textKeys: textKeys,
		partial: len(below) > 0, suspects: map[string]*suspect{}}
	for i := range sp.files {
		if err := j.bucket(ctx, i); err != nil {
			return nil, err
		}
		if n := len(sp.files); n >= 10 && (i+1)%(n/10) == 0 {
			cfg.Logger.Info("reconcile: judging", "buckets", fmt.Sprintf("%d/%d", i+1, n), "keys", rep.Keys,
				"missing", rep.MissingCount, "changed", rep.ChangedCount, "extra", rep.ExtraCount)
		}
	}
	if err := j.recheck(ctx, below); err != nil {
		return nil, err
	}
	if err := j.flushRepair(ctx); err != nil {
		return nil, err
	}
	done()
	for _, fs := range [][]Finding{rep.Missing, rep.Changed, rep.Extra} {
		slices.SortStableFunc(fs, func(a, b Finding) int {
			return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Column, b.Column))
		})
	}
	rep.Finished = time.Now().UTC()
	if err := st.save(ctx, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// plan sets rep's judged ranges (from the stored watermark, or from, up to
// the sink's committed offset), its pending ranges (beyond them, up to the
// last stable offset) and ExtraChecked; it returns the ranges below the
// judged ones (for recheck) and the offsets to read.
func plan(rep *Report, snap []verify.PartitionRange, marks, committed map[int32]int64, from *int64) (below []verify.PartitionRange, total int64) {
	rep.ExtraChecked = true
	for _, p := range snap {
		start := p.Start
		switch {
		case from != nil:
			start = max(start, *from)
		default:
			if m, ok := marks[p.Partition]; ok {
				start = max(start, m)
			}
		}
		end := p.Start // no committed offset: the sink has written nothing of it
		if c, ok := committed[p.Partition]; ok {
			end = min(max(c, p.Start), p.End)
		}
		start = min(start, end)
		if start != 0 {
			rep.ExtraChecked = false
		}
		if start > p.Start {
			below = append(below, verify.PartitionRange{Partition: p.Partition, Start: p.Start, End: start})
		}
		rep.Ranges = append(rep.Ranges, verify.PartitionRange{Partition: p.Partition, Start: start, End: end})
		total += end - start
		if end < p.End {
			rep.Pending = append(rep.Pending, verify.PartitionRange{Partition: p.Partition, Start: end, End: p.End})
			rep.PendingOffsets += p.End - end
		}
	}
	return below, total
}

// read reads ranges of cfg.Topic with read_committed, with fetches bounded
// as a worker's are (256 KiB a partition, 8 MiB a response): kgo's
// defaults (50 MiB responses) took a 1M-record run to 386 MiB of RSS.
func read(ctx context.Context, cfg Config, ranges []verify.PartitionRange, fn func(*kgo.Record)) error {
	err := rangeread.Read(ctx, cfg.ClientOpts, rangeread.Ranges{cfg.Topic: ranges}, rangeread.Options{FetchMaxPartitionBytes: 256 << 10, FetchMaxBytes: 8 << 20}, fn)
	if err != nil {
		return fmt.Errorf("reconcile: reading %s: %w", cfg.Topic, err)
	}
	return nil
}
