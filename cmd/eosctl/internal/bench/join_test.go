package bench

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/eosctltest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The join's judge passes an event joined with its row and fails one
// joined with another row, with none, or with its own fields in place of
// the row's (a join that read the event rather than the table).
func TestJoinJudgeFailsWrongJoins(t *testing.T) {
	ev := func(i int64, extra string) *kgo.Record {
		v := datagen.Value(i, time.UnixMilli(1_700_000_000_000), 100)
		return &kgo.Record{Key: []byte(strconv.FormatInt(i, 10)), Value: append(v[:len(v)-1], extra+"}"...)}
	}
	if bad := joinWrong(ev(7, `,"owner":"owner-7","list_price":`+jsonFloat(joinAmount(7)))); bad != "" {
		t.Fatalf("a right join was judged wrong: %s", bad)
	}
	for name, r := range map[string]*kgo.Record{
		"another row":     ev(7, `,"owner":"owner-8","list_price":`+jsonFloat(joinAmount(8))),
		"no row":          ev(7, `,"owner":null,"list_price":null`),
		"the event's own": ev(7, `,"owner":"`+datagen.User(7)+`","list_price":`+jsonFloat(datagen.Amount(7))),
		"not joined":      ev(7, ""),
		"another event":   {Key: []byte("7"), Value: ev(9, `,"owner":"owner-7","list_price":`+jsonFloat(joinAmount(7))).Value},
	} {
		if joinWrong(r) == "" {
			t.Errorf("%s: judged right: %s", name, r.Value)
		}
	}
}

// runOneEOSRun runs cfg, a topology's settings, for one eos run of
// 20,000 100-byte records over 3 partitions on the embedded broker, its
// worker a child process as eosctl bench runs it, and returns the report
// and the run.
func runOneEOSRun(t *testing.T, cfg Config) (*Report, RunResult) {
	t.Helper()
	bin, cleanup, err := eosctltest.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cfg.Modes, cfg.Intervals, cfg.Sizes = []Mode{ModeEOS}, []Interval{{Fixed: 100 * time.Millisecond}}, []int{100}
	cfg.Records, cfg.Partitions, cfg.Repeat, cfg.RunTimeout, cfg.Bin = 20_000, 3, 1, time.Minute, bin
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 1 || len(rep.Cells[0].Runs) != 1 {
		t.Fatalf("got %+v, want one cell with one eos run", rep.Cells)
	}
	return rep, rep.Cells[0].Runs[0]
}

func jsonFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// `eosctl bench --topology join` on the embedded broker, its worker a
// child process as eosctl bench runs it: the table is seeded, the etl
// worker restores it and joins every event, verify finds every key exactly
// once in order and every output record is its event joined with its row.
// A mode that keeps no table, or more events than rows, is refused before
// anything runs.
func TestJoinBenchJudgesEveryEventJoinedWithItsRow(t *testing.T) {
	for _, bad := range []Config{
		{Topology: topologyJoin, Modes: []Mode{ModeEOS, ModeBare}},
		{Topology: topologyJoin, Records: 2_000, TableRows: 1_000},
	} {
		if err := bad.Validate(); err == nil {
			t.Fatalf("%+v: accepted", bad)
		}
	}
	rep, r := runOneEOSRun(t, Config{Topology: topologyJoin, Records: 20_000, TableRows: 25_000})
	if !r.Verified || r.Duplicates != 0 || r.Missing != 0 || r.JoinsChecked != 20_000 {
		t.Fatalf("the join run was not judged: %+v", r)
	}
	if r.RPS <= 0 || r.CPUSeconds <= 0 || r.E2ESamples != 0 {
		t.Errorf("drain figures missing, or a latency phase that should not be: %+v", r)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "join: the etl topology") || !strings.Contains(table.String(), "25000 rows") {
		t.Errorf("the table does not say what the join runs were:\n%s", table.String())
	}
}
