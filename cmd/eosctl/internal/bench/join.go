package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The join's runs (--topology join) are the etl topology joining every
// backlog record with a row of a table, judged exactly once. They are the
// dedup's runs (dedup.go) with these differences:
//
//   - Before the first run the bench seeds the table topic, compacted and
//     co-partitioned with the backlog: Config.TableRows rows (1,000,000 by
//     default) keyed 0..TableRows-1, each about 100 bytes,
//     {"user":"owner-<key>","amount":<joinAmount(key)>,"pad":"xx…"}.
//   - The backlog's keys cycle through the table's (datagen.Config.Keys):
//     event i is keyed i mod TableRows and carries seq i, so every event
//     has its row and a run can be longer than the table, which a figure
//     steadier than a second's drain needs.
//   - The eos workers run the etl topology with joinConfig, which
//     restores the table from its topic at the assignment (the restore is
//     in the drain's time) and writes the row's user and amount into each
//     event as owner and list_price.
//   - The judge (judgeJoin) reads the seqs, not the keys: every event
//     exactly once, in input order per partition, and every output record
//     checked against the reference: its own seq, user and amount
//     (datagen functions of its seq), its key, and owner and list_price
//     from joinAmount of its key, which the table was written from, never
//     anything the workers read. A join that read the event's own fields
//     would fail it.
//
// Only the eos mode runs it, for the dedup's reasons.

// topologyJoin is the --topology these runs are for; the workers run etl.
const topologyJoin = "join"

// DefaultTableRows is the join table's size by default, the issue's.
const DefaultTableRows = 1_000_000

// joinConfigText is the workers' configuration for the table topic.
func joinConfigText(table string) string {
	return "topology: etl\njoin: {table: " + table + ", key: _key, as: row}\nmap: {owner: row.user, list_price: row.amount}\n"
}

// joinAmount is the table's amount of key i, one decimal.
func joinAmount(i int64) float64 { return float64(i*7919%100_003) / 10 }

// joinRow is the table's row of key i, padded to about 100 bytes.
func joinRow(i int64) []byte {
	b := fmt.Appendf(nil, `{"user":"owner-%d","amount":%s,"pad":"`, i, strconv.FormatFloat(joinAmount(i), 'f', 1, 64))
	for len(b) < 98 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// workerTopology is the topology the workers of topology run.
func workerTopology(topology string) string {
	if topology == topologyJoin {
		return "etl"
	}
	return topology
}

// seedJoinTable writes the table and the workers' configuration.
func (b *bencher) seedJoinTable(ctx context.Context) error {
	table := b.prefix + "-table"
	b.topics = append(b.topics, table)
	compact := "compact"
	if _, _, err := admin.EnsureTopic(ctx, b.adm, table, b.cfg.Partitions, map[string]*string{"cleanup.policy": &compact}); err != nil {
		return fmt.Errorf("bench: creating the join table: %w", err)
	}
	start := time.Now()
	const chunk = 10_000
	n := b.cfg.tableRows()
	for from := int64(0); from < n; from += chunk {
		rs := make([]*kgo.Record, 0, chunk)
		for i := from; i < min(from+chunk, n); i++ {
			rs = append(rs, &kgo.Record{Topic: table, Key: []byte(strconv.FormatInt(i, 10)), Value: joinRow(i)})
		}
		if err := b.adm.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("bench: writing the join table: %w", err)
		}
		if b.cfg.Progress != nil {
			b.cfg.Progress(Progress{Phase: "table", Done: min(from+chunk, n), Total: n, Elapsed: time.Since(start), Runs: b.totalRuns()})
		}
	}
	b.joinConfig = filepath.Join(b.dir, "join.yaml")
	if err := os.WriteFile(b.joinConfig, []byte(joinConfigText(table)), 0o644); err != nil {
		return fmt.Errorf("bench: writing the join configuration: %w", err)
	}
	return nil
}

// judgeJoin is the join's verdict, in place of verify's copy verdict: the
// events' keys cycle through the table's (datagen.Config.Keys), so a key
// is no record's identity once --records passes --table-rows; the seq in
// its value is. It reads the output as a read_committed consumer sees it,
// record by record (a bit an event is all it keeps), and checks that
// every seq of the backlog, 0 to Records-1, is there exactly once; that
// every output partition holds its seqs in increasing order, which is the
// input's order (datagen writes each partition in seq order, and a key
// stays on its partition); and that every record is its event joined
// with its row (joinWrong).
func (b *bencher) judgeJoin(ctx context.Context, res *RunResult, job copyJob) error {
	if err := b.awaitStable(ctx, job.output); err != nil {
		return err
	}
	j := newJoinJudge(res.Records, b.cfg.tableRows())
	if err := committed.Each(ctx, b.opts, job.output, func(int32) {}, j.add); err != nil {
		return fmt.Errorf("reading the output to judge the join: %w", err)
	}
	v := j.verdict()
	res.Verified, res.Duplicates, res.Missing, res.JoinsChecked = v.ok(), v.duplicates, v.missing, v.records
	if !v.ok() {
		return fmt.Errorf("the join's output is not every event exactly once, in order, joined with its row: %s", v)
	}
	return nil
}

// joinVerdict is what a joinJudge found.
type joinVerdict struct {
	records                                int64 // output records read
	duplicates, missing, unexpected, order int64
	wrong                                  int64  // records not their event joined with its row
	example                                string // the first problem found
}

func (v joinVerdict) ok() bool {
	return v.duplicates == 0 && v.missing == 0 && v.unexpected == 0 && v.order == 0 && v.wrong == 0
}

func (v joinVerdict) String() string {
	return fmt.Sprintf("%d records read: %d duplicates, %d missing, %d unexpected, %d out of order, %d wrongly joined (first: %s)",
		v.records, v.duplicates, v.missing, v.unexpected, v.order, v.wrong, v.example)
}

// joinJudge judges the output of a join of events 0 to events-1 with a
// table of rows rows, record by record as they are read, keeping a bit
// per event and the last seq of each output partition, not the records.
type joinJudge struct {
	events, rows int64
	seen         []uint64 // a bit per seq
	distinct     int64
	last         map[int32]int64 // output partition -> its last seq
	v            joinVerdict
}

func newJoinJudge(events, rows int64) *joinJudge {
	return &joinJudge{events: events, rows: rows, seen: make([]uint64, (events+63)/64), last: map[int32]int64{}}
}

func (j *joinJudge) note(r *kgo.Record, what string) {
	if j.v.example == "" {
		j.v.example = fmt.Sprintf("partition %d offset %d, key %s: %s", r.Partition, r.Offset, r.Key, what)
	}
}

// add judges the next output record of its partition.
func (j *joinJudge) add(r *kgo.Record) {
	j.v.records++
	seq, bad := joinWrong(r, j.rows)
	switch {
	case seq < 0 || seq >= j.events:
		j.v.unexpected++
		if seq >= 0 {
			bad = fmt.Sprintf("seq %d is no event's (the backlog's are 0 to %d)", seq, j.events-1)
		}
		j.note(r, bad)
		return
	case j.seen[seq/64]&(1<<(seq%64)) != 0:
		j.v.duplicates++
		j.note(r, fmt.Sprintf("seq %d again", seq))
		return
	}
	j.seen[seq/64] |= 1 << (seq % 64)
	j.distinct++
	if last, ok := j.last[r.Partition]; ok && seq < last {
		j.v.order++
		j.note(r, fmt.Sprintf("seq %d after %d", seq, last))
	}
	j.last[r.Partition] = seq
	if bad != "" {
		j.v.wrong++
		j.note(r, bad)
	}
}

// verdict is the judgment once every record was added.
func (j *joinJudge) verdict() joinVerdict {
	v := j.v
	v.missing = j.events - j.distinct
	if v.missing > 0 && v.example == "" {
		for i := range j.events {
			if j.seen[i/64]&(1<<(i%64)) == 0 {
				v.example = fmt.Sprintf("seq %d is missing", i)
				break
			}
		}
	}
	return v
}

// joinWrong returns output record r's seq (-1 if it has none) and what is
// wrong with it as event seq joined with its row, or "": its key must be
// seq mod rows (datagen.Config.Keys), its own fields datagen's of seq, and
// owner and list_price those of its key's row, from joinAmount, which the
// table was written from, never anything the workers read.
func joinWrong(r *kgo.Record, rows int64) (int64, string) {
	var v struct {
		Seq       *int64
		User      *string
		Amount    *float64
		Owner     *string
		ListPrice *float64 `json:"list_price"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return -1, fmt.Sprintf("%s: %v", r.Value, err)
	}
	if v.Seq == nil {
		return -1, fmt.Sprintf("%s: no seq", r.Value)
	}
	i := *v.Seq
	k := i % rows
	switch {
	case string(r.Key) != strconv.FormatInt(k, 10):
		return i, fmt.Sprintf("%s: event %d is keyed %d", r.Value, i, k)
	case v.User == nil || *v.User != datagen.User(i), v.Amount == nil || *v.Amount != datagen.Amount(i):
		return i, fmt.Sprintf("%s: not event %d's own fields", r.Value, i)
	case v.Owner == nil || *v.Owner != "owner-"+strconv.FormatInt(k, 10), v.ListPrice == nil || *v.ListPrice != joinAmount(k):
		return i, fmt.Sprintf("%s: want owner-%d and list_price %v from its row", r.Value, k, joinAmount(k))
	}
	return i, ""
}

// joinNote describes the join's runs for the report.
func joinNote(p Params) string {
	return fmt.Sprintf("join: the etl topology, %s, against a table of %d rows (about 100 bytes, restored from its topic at the assignment, in the drain's time), events keyed seq mod the rows, judged by their seqs (every event exactly once, in order) and every output record checked against its event and its row's reference; no e2e latency: a worker with a table reads one input, so there is no live input",
		strings.TrimSpace(strings.ReplaceAll(joinConfigText("TABLE"), "\n", "; ")), p.TableRows)
}

// tableRows is the join table's size.
func (c *Config) tableRows() int64 {
	if c.TableRows > 0 {
		return c.TableRows
	}
	return DefaultTableRows
}

// joinTableRows is the table's size for the report: 0 unless a join.
func (c *Config) joinTableRows() int64 {
	if c.Topology != topologyJoin {
		return 0
	}
	return c.tableRows()
}

// validateJoin checks the join's settings: eos alone, no key header.
func (c *Config) validateJoin() error {
	switch {
	case c.TableRows < 0:
		return eos.BadConfig("bench.Config.TableRows", "must be positive, got %d", c.TableRows)
	case c.Topology != topologyJoin:
		return nil
	case c.KeyHeader != "":
		return eos.BadConfig("bench.Config.KeyHeader", "the join's input has no key header: leave it empty, not %q", c.KeyHeader)
	}
	for _, m := range c.Modes {
		if m != ModeEOS {
			return eos.BadConfig("bench.Config.Modes", "the join runs in the eos mode only (no copy loop keeps a table): drop %s from the modes", m)
		}
	}
	return nil
}
