package bench

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/eosctltest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The join's judge passes every event joined with its row once, in order,
// and fails an output with any one record wrong: joined with another row,
// with none, with its own fields in place of the row's (a join that read
// the event rather than the table), not joined, keyed as another event, or
// an event twice, missing, out of its partition's order, or not an event.
func TestJoinJudgeFailsWrongJoins(t *testing.T) {
	const events, rows = 130, 7 // the keys cycle 18 times and a bit; the judge keeps three words of bits
	ts := time.UnixMilli(1_700_000_000_000)
	joined := func(i, row int64, extra string) *kgo.Record {
		v := datagen.Value(i, ts, 100)
		if extra == "" {
			extra = `,"owner":"owner-` + strconv.FormatInt(row, 10) + `","list_price":` + jsonFloat(joinAmount(row))
		}
		return &kgo.Record{Key: []byte(strconv.FormatInt(i%rows, 10)), Value: append(v[:len(v)-1], extra+"}"...)}
	}
	judge := func(parts map[int32][]*kgo.Record) joinVerdict {
		j := newJoinJudge(events, rows)
		for p := range int32(3) {
			for _, r := range parts[p] {
				r.Partition = p
				j.add(r)
			}
		}
		return j.verdict()
	}
	right := func() map[int32][]*kgo.Record {
		parts := map[int32][]*kgo.Record{}
		for i := range int64(events) {
			p := int32(i % rows % 3)
			parts[p] = append(parts[p], joined(i, i%rows, ""))
		}
		return parts
	}
	if v := judge(right()); !v.ok() || v.records != events {
		t.Fatalf("the right output was judged wrong: %s", v)
	}
	// Event 9 (key 2, partition 2) is the one spoiled.
	at := func(parts map[int32][]*kgo.Record, seq int64) int {
		for k, r := range parts[2] {
			if bytes.Contains(r.Value, []byte(`"seq":`+strconv.FormatInt(seq, 10)+`,`)) {
				return k
			}
		}
		t.Fatalf("no event %d on partition 2", seq)
		return -1
	}
	for name, spoil := range map[string]func(map[int32][]*kgo.Record){
		"another row": func(ps map[int32][]*kgo.Record) { ps[2][at(ps, 9)] = joined(9, 3, "") },
		"no row":      func(ps map[int32][]*kgo.Record) { ps[2][at(ps, 9)] = joined(9, 0, `,"owner":null,"list_price":null`) },
		"the event's own": func(ps map[int32][]*kgo.Record) {
			ps[2][at(ps, 9)] = joined(9, 0, `,"owner":"`+datagen.User(9)+`","list_price":`+jsonFloat(datagen.Amount(9)))
		},
		"not joined":   func(ps map[int32][]*kgo.Record) { ps[2][at(ps, 9)] = joined(9, 0, " ") },
		"another key":  func(ps map[int32][]*kgo.Record) { ps[2][at(ps, 9)].Key = []byte("9") },
		"twice":        func(ps map[int32][]*kgo.Record) { ps[2] = append(ps[2], joined(9, 2, "")) },
		"missing":      func(ps map[int32][]*kgo.Record) { ps[2] = slices.Delete(ps[2], at(ps, 9), at(ps, 9)+1) },
		"out of order": func(ps map[int32][]*kgo.Record) { k := at(ps, 9); ps[2][k], ps[2][k+1] = ps[2][k+1], ps[2][k] },
		"not an event": func(ps map[int32][]*kgo.Record) { ps[2] = append(ps[2], joined(events+rows-1, rows-1, "")) },
		"no seq":       func(ps map[int32][]*kgo.Record) { ps[2][at(ps, 9)].Value = []byte(`{"owner":"owner-2"}`) },
	} {
		parts := right()
		spoil(parts)
		if v := judge(parts); v.ok() {
			t.Errorf("%s: judged right: %s", name, v)
		} else {
			t.Logf("%s: %s", name, v)
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
// worker restores it and joins every event, and the judge finds every
// event exactly once, in order, joined with its row.
// The events outnumber the rows, so their keys cycle through the table's.
// A mode that keeps no table is refused before anything runs.
func TestJoinBenchJudgesEveryEventJoinedWithItsRow(t *testing.T) {
	for _, bad := range []Config{
		{Topology: topologyJoin, Modes: []Mode{ModeEOS, ModeBare}},
		{Topology: topologyJoin, TableRows: -1},
	} {
		if err := bad.Validate(); err == nil {
			t.Fatalf("%+v: accepted", bad)
		}
	}
	rep, r := runOneEOSRun(t, Config{Topology: topologyJoin, TableRows: 8_000})
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
	if !strings.Contains(table.String(), "join: the etl topology") || !strings.Contains(table.String(), "8000 rows") {
		t.Errorf("the table does not say what the join runs were:\n%s", table.String())
	}
}
