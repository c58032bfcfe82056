package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topologyJoin is the etl join's workload: see joining.
const topologyJoin = "etl-join"

// joinTable is the table topic of the join drill (its app is "join").
const joinTable = "join-table"

// joinConfig joins each datagen record with the row of its own key and
// writes the row's price into it.
const joinConfig = "topology: etl\njoin: {table: " + joinTable + ", key: _key, as: row}\nmap:\n  price: row.price\n"

// joinPrice is the table's price of key i: a function of i alone, which
// the judge recomputes instead of trusting anything the workers read.
func joinPrice(i int64) int64 { return i * 7919 % 100_003 }

// joining runs the etl topology with a join on datagen records keyed
// 0..n-1, against a table of n rows written completely, keyed the same
// way and co-partitioned, before the first event: the row current at every
// event's position is then the only row of its key, so the reference is
// joinPrice of the event's key. It is judged by verify like a copy (every
// key once, in input order per partition, the concurrent read_committed
// reader seeing no key twice), and then every output record's price must
// be its key's reference price.
type joining struct {
	copying
}

func (*joining) topology(h *harness) ([]string, error) {
	cfg := filepath.Join(h.dir, "join.yaml")
	if err := os.WriteFile(cfg, []byte(joinConfig), 0o644); err != nil {
		return nil, fmt.Errorf("writing the join configuration: %w", err)
	}
	return []string{"etl", "--config", cfg}, nil
}

func (j *joining) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	if _, _, err := admin.EnsureTopic(ctx, h.Client, joinTable, partitions, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
		return nil, err
	}
	// ProduceSync returns once every row is acknowledged by all in-sync
	// replicas: all of them precede the first event.
	const chunk = 10_000
	for from := int64(0); from < n; from += chunk {
		var rs []*kgo.Record
		for i := from; i < min(from+chunk, n); i++ {
			rs = append(rs, &kgo.Record{Topic: joinTable, Key: []byte(strconv.FormatInt(i, 10)), Value: fmt.Appendf(nil, `{"price":%d}`, joinPrice(i))})
		}
		if err := h.Client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return nil, fmt.Errorf("writing the table: %w", err)
		}
	}
	return j.copying.produce(ctx, h, in, partitions, n, rate)
}

func (j *joining) finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error {
	return j.copying.finishChecked(ctx, h, res, app, in, out, partitions,
		"joined records checked against the table's reference price", "joined the wrong row or none",
		func(r *kgo.Record) string {
			i, err := strconv.ParseInt(string(r.Key), 10, 64)
			var v struct{ Price *int64 }
			if err == nil {
				err = json.Unmarshal(r.Value, &v)
			}
			if err != nil || v.Price == nil || *v.Price != joinPrice(i) {
				return fmt.Sprintf("%s, want price %d", r.Value, joinPrice(i))
			}
			return ""
		})
}

// finishChecked is finish, then every output record is checked: check
// returns what is wrong with a record, or "" if nothing. note says what
// was checked (for the result's notes), failure what a wrong record is
// (for the error, which counts them and shows the first).
func (c *copying) finishChecked(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32, note, failure string, check func(*kgo.Record) string) error {
	if err := c.finish(ctx, h, res, app, in, out, partitions); err != nil {
		return err
	}
	return checkRecords(ctx, h, res, out, note, failure, check)
}

// checkRecords reads out (read_committed) and checks every record with
// check, as finishChecked says.
func checkRecords(ctx context.Context, h *harness, res *Result, out, note, failure string, check func(*kgo.Record) string) error {
	parts, err := committed.Read(ctx, h.Opts, out)
	if err != nil {
		return fmt.Errorf("reading the output to check its records: %w", err)
	}
	wrong, n := 0, 0
	var example string
	for _, r := range committed.Flatten(parts) {
		n++
		if bad := check(r); bad != "" {
			if wrong++; example == "" {
				example = fmt.Sprintf("key %s: %s", r.Key, bad)
			}
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d %s", n, note))
	if wrong > 0 {
		return fmt.Errorf("%d of %d output records %s (e.g. %s)", wrong, n, failure, example)
	}
	return nil
}

// joinKills SIGKILLs the join's two workers mid-transaction at random;
// each restart restores the table from its topic before it processes a
// record.
func joinKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "join")
}
