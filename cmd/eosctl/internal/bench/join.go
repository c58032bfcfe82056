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
//     default) keyed 0..TableRows-1 as datagen keys the backlog, each
//     about 100 bytes, {"user":"owner-<key>","amount":<joinAmount(key)>,
//     "pad":"xx…"}. --records must not exceed it, so every event has its row.
//   - The eos workers run the etl topology with joinConfig, which
//     restores the table from its topic at the assignment (the restore is
//     in the drain's time) and writes the row's user and amount into each
//     event as owner and list_price.
//   - The judge is verify's copy verdict on the keys (every key exactly
//     once, in input order per partition), then every output record is
//     checked against the reference: its own seq, user and amount (datagen
//     functions of its key) and owner and list_price from joinAmount of its
//     key, which the table was written from, never anything the workers
//     read. A join that read the event's own fields would fail it.
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

// checkJoin checks every output record of a run verify passed against the
// reference, and records how many it checked.
func (b *bencher) checkJoin(ctx context.Context, res *RunResult, job copyJob) error {
	parts, err := committed.Read(ctx, b.opts, job.output)
	if err != nil {
		return fmt.Errorf("reading the output to check its joins: %w", err)
	}
	wrong, n := 0, int64(0)
	var example string
	for _, r := range committed.Flatten(parts) {
		n++
		if bad := joinWrong(r); bad != "" {
			if wrong++; example == "" {
				example = fmt.Sprintf("key %s: %s", r.Key, bad)
			}
		}
	}
	res.JoinsChecked = n
	if wrong > 0 {
		res.Verified = false
		return fmt.Errorf("%d of %d output records are not their event joined with its row (e.g. %s)", wrong, n, example)
	}
	return nil
}

// joinWrong says what is wrong with output record r, or "".
func joinWrong(r *kgo.Record) string {
	i, err := strconv.ParseInt(string(r.Key), 10, 64)
	if err != nil {
		return "the key is not a datagen key"
	}
	var v struct {
		Seq       *int64
		User      *string
		Amount    *float64
		Owner     *string
		ListPrice *float64 `json:"list_price"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return fmt.Sprintf("%s: %v", r.Value, err)
	}
	switch {
	case v.Seq == nil || *v.Seq != i, v.User == nil || *v.User != datagen.User(i), v.Amount == nil || *v.Amount != datagen.Amount(i):
		return fmt.Sprintf("%s: not event %d's own fields", r.Value, i)
	case v.Owner == nil || *v.Owner != "owner-"+strconv.FormatInt(i, 10), v.ListPrice == nil || *v.ListPrice != joinAmount(i):
		return fmt.Sprintf("%s: want owner-%d and list_price %v from its row", r.Value, i, joinAmount(i))
	}
	return ""
}

// joinNote describes the join's runs for the report.
func joinNote(p Params) string {
	return fmt.Sprintf("join: the etl topology, %s, against a table of %d rows (about 100 bytes, restored from its topic at the assignment, in the drain's time), judged by verify (every key exactly once, in order) and every output record checked against its event and its row's reference; no e2e latency: a worker with a table reads one input, so there is no live input",
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

// validateJoin checks the join's settings: eos alone, no key header, a
// row for every event.
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
	for _, size := range c.Sizes {
		if n := c.records(size); n > c.tableRows() {
			return eos.BadConfig("bench.Config.Records", "the join's table has %d rows (bench.Config.TableRows) and every event needs its row: at most %d records, got %d", c.tableRows(), c.tableRows(), n)
		}
	}
	return nil
}
