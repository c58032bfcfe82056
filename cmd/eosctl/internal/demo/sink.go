package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/reconcile"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SinkConfig configures `eosctl demo sink`.
type SinkConfig struct {
	Records int64  // input records; default 20,000
	Kills   int    // SIGKILLs of each sink; default 4
	Bin     string // the eosctl binary; empty means this executable
	Out     io.Writer
	Logger  *slog.Logger
}

// SinkReport is the outcome of the sink demo.
type SinkReport struct {
	Records       int64 `json:"records"`
	Kills         int   `json:"kills_each"`
	NaiveRows     int64 `json:"naive_rows"`
	NaiveDistinct int64 `json:"naive_distinct_keys"`
	SinkRows      int64 `json:"sink_rows"`
	SinkDistinct  int64 `json:"sink_distinct_keys"`
	// Reconcile found the planted rows; Repaired is what --repair wrote.
	FoundMissing []string `json:"reconcile_missing"`
	FoundExtra   []string `json:"reconcile_extra"`
	Repaired     int      `json:"repaired"`
	AfterRepair  string   `json:"after_repair"`
	OK           bool     `json:"ok"`
	Verdict      string   `json:"verdict"`
}

const sinkDemoMapping = `table: %s
key_column: seq
key: seq
columns:
  usr: user
  amount: amount
`

// Sink runs the database sink demo on an embedded broker and an SQLite
// file: the naive at-least-once sink and `eosctl sink` go through the same
// SIGKILLs and a replay from offset 0; the naive one's table shows
// duplicate rows, the idempotent one's none. Then a row is deleted and one
// planted in the idempotent sink's table, and reconcile finds both and
// repairs the missing one.
func Sink(ctx context.Context, cfg SinkConfig) (*SinkReport, error) {
	if cfg.Records <= 0 {
		cfg.Records = 20_000
	}
	if cfg.Kills <= 0 {
		cfg.Kills = 4
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Bin = self
	}
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Out, format+"\n", args...) }
	dir, err := os.MkdirTemp("", "eosctl-demo-sink-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := admin.Connect(ctx, 10*time.Second, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if _, err := datagen.Produce(ctx, cl, datagen.Config{Topic: "payments", Count: cfg.Records, Size: 100, Partitions: 2}); err != nil {
		return nil, err
	}
	dsn := "sqlite:" + filepath.Join(dir, "demo.db")
	db, err := sink.Open(dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// The naive sink's table has no unique key (a plain INSERT would fail
	// on one); the idempotent sink's has one on the idempotency key.
	for _, q := range []string{
		"CREATE TABLE naive_payments (seq BIGINT NOT NULL, usr TEXT NOT NULL, amount DOUBLE PRECISION)",
		"CREATE TABLE payments (seq BIGINT PRIMARY KEY, usr TEXT NOT NULL, amount DOUBLE PRECISION)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, err
		}
	}
	mappings := map[string]string{}
	for _, t := range []string{"naive_payments", "payments"} {
		mappings[t] = filepath.Join(dir, t+".yaml")
		if err := os.WriteFile(mappings[t], fmt.Appendf(nil, sinkDemoMapping, t), 0o644); err != nil {
			return nil, err
		}
	}
	rep := &SinkReport{Records: cfg.Records, Kills: cfg.Kills}
	say("eosctl demo sink: %d payment records on topic payments (embedded broker), one SQLite database (%s)", cfg.Records, dsn)

	count := func(q string) int64 {
		var n int64
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	start := func(name, group, table string, extra ...string) (*supervise.Proc, error) {
		args := append([]string{"sink", "--brokers", b.Addrs()[0], "--to", dsn, "--mapping", mappings[table], "--group", group,
			"--input", "payments", "--instance", "0", "--session-timeout", "2s", "--batch-size", "200", "--log-level", "error"}, extra...)
		return supervise.Start(ctx, supervise.Config{Name: name, Bin: cfg.Bin, Args: args, Stderr: os.Stderr})
	}
	// run starts a sink, SIGKILLs it Kills times mid-run (each time once
	// progress moved on; restarting it each time), and waits until done
	// says it is through.
	run := func(name, group, table string, progress func() int64, done func() bool, extra ...string) error {
		p, err := start(name, group, table, extra...)
		if err != nil {
			return err
		}
		step := cfg.Records / int64(2*(cfg.Kills+1))
		for k := range cfg.Kills {
			// Kill it while it writes: once it wrote some rows more.
			from := progress()
			for deadline := time.Now().Add(10 * time.Second); progress() < from+step && time.Now().Before(deadline); {
				time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
			}
			p.Kill()
			say("  %-6s SIGKILL %d of %d with %d rows in %s; restarted", name, k+1, cfg.Kills, count("SELECT COUNT(*) FROM "+table), table)
			if p, err = start(name, group, table, extra...); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(2 * time.Minute)
		for !done() {
			if time.Now().After(deadline) || ctx.Err() != nil {
				p.Kill()
				return fmt.Errorf("%s did not finish within 2 minutes", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = p.Signal(syscall.SIGTERM)
		p.Wait()
		return nil
	}
	naiveDone := func(group string) func() bool {
		return func() bool {
			lag, err := inspect.Lag(ctx, kadm.NewClient(cl), group, "payments")
			return err == nil && lag.TotalLag == 0
		}
	}
	naiveRows := func() int64 { return count("SELECT COUNT(*) FROM naive_payments") }
	// The idempotent sink's progress is its stored offsets: a replay adds
	// no rows.
	sinkProgress := func() int64 {
		stored, err := sink.StoredOffsets(ctx, db, "eos_sink_offsets", "payments-sink")
		if err != nil {
			return 0
		}
		var sum int64
		for _, o := range stored["payments"] {
			sum += o
		}
		return sum
	}
	sinkDone := func() bool { return sinkProgress() >= cfg.Records }

	say("\n1. The naive sink: one INSERT per record, offsets committed to Kafka after the rows (at-least-once).")
	if err := run("naive", "naive-sink", "naive_payments", naiveRows, naiveDone("naive-sink"), "--naive"); err != nil {
		return nil, err
	}
	say("   replay of the whole topic from offset 0 (a new consumer group):")
	if err := run("naive", "naive-replay", "naive_payments", naiveRows, naiveDone("naive-replay"), "--naive"); err != nil {
		return nil, err
	}
	rep.NaiveRows, rep.NaiveDistinct = count("SELECT COUNT(*) FROM naive_payments"), count("SELECT COUNT(DISTINCT seq) FROM naive_payments")
	say("   naive_payments: %d rows for %d keys: %d duplicate rows", rep.NaiveRows, rep.NaiveDistinct, rep.NaiveRows-rep.NaiveDistinct)

	say("\n2. eosctl sink: rows and offsets in one transaction, INSERT ... ON CONFLICT (key) DO NOTHING.")
	if err := run("sink", "payments-sink", "payments", sinkProgress, sinkDone); err != nil {
		return nil, err
	}
	say("   replay of the whole topic from offset 0 (--replay):")
	if err := run("sink", "payments-sink", "payments", sinkProgress, sinkDone, "--replay"); err != nil {
		return nil, err
	}
	rep.SinkRows, rep.SinkDistinct = count("SELECT COUNT(*) FROM payments"), count("SELECT COUNT(DISTINCT seq) FROM payments")
	say("   payments: %d rows for %d keys: %d duplicate rows", rep.SinkRows, rep.SinkDistinct, rep.SinkRows-rep.SinkDistinct)

	say("\n3. What only reconciliation catches: a row deleted and a row planted behind the sink's back.")
	for _, q := range []string{"DELETE FROM payments WHERE seq = 7", "INSERT INTO payments (seq, usr, amount) VALUES (-1, 'planted', 0)"} {
		say("   %s", q)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, err
		}
	}
	m, err := sink.ParseMapping("payments.yaml", fmt.Appendf(nil, sinkDemoMapping, "payments"))
	if err != nil {
		return nil, err
	}
	zero := int64(0)
	rc := reconcile.Config{DSN: dsn, Topic: "payments", Group: "payments-sink", Mapping: m, ClientOpts: opts, From: &zero, Repair: true}
	found, err := reconcile.Run(ctx, rc)
	if err != nil {
		return nil, err
	}
	for _, f := range found.Missing {
		rep.FoundMissing = append(rep.FoundMissing, f.Key)
	}
	for _, f := range found.Extra {
		rep.FoundExtra = append(rep.FoundExtra, f.Key)
	}
	rep.Repaired = found.Repaired
	say("   eosctl reconcile --from 0 --repair: %s", found.Summary())
	rc.Repair = false
	after, err := reconcile.Run(ctx, rc)
	if err != nil {
		return nil, err
	}
	rep.AfterRepair = after.Summary()
	say("   rerun: %s (the extra row is reported, never deleted)", after.Summary())

	rep.OK = rep.NaiveRows > rep.NaiveDistinct && rep.SinkRows == cfg.Records && rep.SinkDistinct == cfg.Records &&
		len(rep.FoundMissing) == 1 && rep.FoundMissing[0] == "7" && len(rep.FoundExtra) == 1 && rep.FoundExtra[0] == "-1" &&
		rep.Repaired == 1 && len(after.Missing) == 0 && len(after.Extra) == 1
	if rep.OK {
		rep.Verdict = fmt.Sprintf("the naive sink wrote %d duplicate rows; eosctl sink none through the same %d kills and replay; reconcile found the missing and the extra row and repaired the missing one", rep.NaiveRows-rep.NaiveDistinct, cfg.Kills)
	} else {
		rep.Verdict = "the demo did not show what it should: see the numbers above"
	}
	say("\n%s", rep.Verdict)
	return rep, nil
}
