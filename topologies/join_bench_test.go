package topologies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchTableRows is the join benchmarks' table size (EOS_BENCH_TABLE_ROWS
// to change it).
func benchTableRows() int64 {
	if v, err := strconv.ParseInt(os.Getenv("EOS_BENCH_TABLE_ROWS"), 10, 64); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// BenchmarkJoinTableRestore restores a table of 1,000,000 rows
// (EOS_BENCH_TABLE_ROWS to change it; 100-byte datagen values, 6
// partitions, an embedded broker in the same process): each op is, for
// each kind of table in turn, one Table that starts, is assigned every
// partition and syncs, which reads the whole topic read_committed into
// memory. The kinds: raw, a Table as a custom processor has it (rows kept
// as they are); prepared, the etl join's of map: {owner: row.user,
// list_price: row.amount} (each row checked as it is stored and cut to
// those two fields). It reports, for each, the rows per second, the
// seconds per restore and the MB of entries held.
//
//	go test ./topologies -run '^$' -bench JoinTableRestore -benchtime 5x
func BenchmarkJoinTableRestore(b *testing.B) {
	rows := benchTableRows()
	ctx := context.Background()
	br, err := broker.Start(broker.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(br.Addrs()...)}
	cl, err := admin.Connect(ctx, 10*time.Second, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := datagen.Produce(ctx, cl, datagen.Config{Topic: "table", Count: rows, Size: 100, Partitions: 6}); err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(b.TempDir(), "join.yaml")
	if err := os.WriteFile(cfg, []byte("topology: etl\njoin: {table: table, key: _key, as: row}\nmap: {owner: row.user, list_price: row.amount}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	kinds := []string{"raw", "prepared"}
	secs, held := map[string][]float64{}, map[string]int64{}
	b.ResetTimer()
	for range b.N {
		for _, kind := range kinds {
			runtime.GC()
			var tb *Table
			if kind == "raw" {
				tb, err = NewTable("table", "")
			} else {
				var etl *ETL
				if etl, err = NewETL(cfg); err == nil {
					tb = etl.join.table
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := tb.Start(ctx, pipeline.StartEnv{ClientOpts: opts, Inputs: []string{"table"}}); err != nil {
				b.Fatal(err)
			}
			tb.Assigned([]int32{0, 1, 2, 3, 4, 5})
			if err := tb.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			secs[kind] = append(secs[kind], time.Since(start).Seconds())
			if s := tb.Stats(); s.Rows != rows {
				b.Fatalf("%s: %d rows restored, want %d", kind, s.Rows, rows)
			}
			held[kind] = 0
			for _, tp := range tb.owned {
				held[kind] += tp.rows.live
			}
			tb.Stop()
		}
	}
	b.StopTimer()
	for _, kind := range kinds {
		s := median(secs[kind])
		b.ReportMetric(float64(rows)/s, "rows/s-"+kind)
		b.ReportMetric(s, "s/restore-"+kind)
		b.ReportMetric(float64(held[kind])/1e6, "MB-held-"+kind)
		fmt.Printf("%s: rounds=%d rows=%d restore median %.2fs (%.0f rows/s) over %.2f; entries %.1f MB\n", kind, b.N, rows, s, float64(rows)/s, secs[kind], float64(held[kind])/1e6)
	}
}

// BenchmarkJoinThroughput compares the etl topology joining every record
// with a table of 1,000,000 rows against passthrough and against the same
// etl map without the join (the etl topology's own cost), as
// BenchmarkTopologyThroughput compares the others (drain: one in-process
// worker, a fresh embedded broker, a backlog of 1,000,000 100-byte datagen
// records in 6 partitions; EOS_BENCH_RECORDS and EOS_BENCH_TABLE_ROWS to
// change them), the modes interleaved round by round. The table is datagen
// records keyed as the input (its key i is input record i's), so every
// lookup finds a row and decodes it the first time. The join's rate is
// reported twice: over the whole drain, and without its restore of the
// table (which BenchmarkJoinTableRestore measures alone), the
// steady-state rate the 0.7 target of passthrough is about.
//
//	go test ./topologies -run '^$' -bench JoinThroughput -benchtime 3x
func BenchmarkJoinThroughput(b *testing.B) {
	n := int64(1_000_000)
	if v, err := strconv.ParseInt(os.Getenv("EOS_BENCH_RECORDS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	rows := benchTableRows()
	dir := b.TempDir()
	// The same map without a join: the etl topology's own cost.
	noJoin := filepath.Join(dir, "etl.yaml")
	if err := os.WriteFile(noJoin, []byte("topology: etl\nmap:\n  owner: user\n  list_price: amount\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rates := map[string][]float64{}
	cpus := map[string][]float64{} // µs of the process's CPU per input record
	var seq atomic.Int64
	b.ResetTimer()
	for range b.N {
		for _, mode := range benchJoinModes() {
			id := fmt.Sprintf("jn%d", seq.Add(1))
			bl := newBacklog(b, ctx, id, n, "")
			var tr pipeline.Transform = Passthrough{}
			var etl *ETL
			switch mode {
			case "etl":
				var err error
				if tr, err = NewETL(noJoin); err != nil {
					b.Fatal(err)
				}
			case "etl-join":
				if _, err := datagen.Produce(ctx, bl.cl, datagen.Config{Topic: id + "-table", Count: rows, Size: 100, Partitions: 6}); err != nil {
					b.Fatal(err)
				}
				cfg := filepath.Join(dir, id+".yaml")
				body := fmt.Sprintf("topology: etl\njoin: {table: %s-table, key: _key, as: row}\nmap:\n  owner: row.user\n  list_price: row.amount\n", id)
				if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
					b.Fatal(err)
				}
				var err error
				if etl, err = NewETL(cfg); err != nil {
					b.Fatal(err)
				}
				tr = etl
			}
			runtime.GC()
			// The CPU the restore took: the process's CPU from here until
			// the table says it is restored.
			cpu0 := processCPU(b)
			restoreCPU := make(chan time.Duration, 1)
			stop := make(chan struct{})
			if etl != nil {
				go func() {
					for {
						select {
						case <-stop:
							restoreCPU <- 0
							return
						case <-time.After(5 * time.Millisecond):
						}
						if s, _ := etl.JoinStats(); s.RestoreTime > 0 {
							restoreCPU <- processCPU(b) - cpu0
							return
						}
					}
				}()
			}
			rate, cpu := drain(b, ctx, bl.cl, bl.opts, id, mode, n, tr, []string{id + "-in"})
			close(stop)
			rates[mode] = append(rates[mode], rate)
			cpus[mode] = append(cpus[mode], cpu)
			if etl != nil {
				s, _ := etl.JoinStats()
				if s.Lookups < n || s.Misses > 0 || s.Rows != rows {
					b.Fatalf("join stats %+v after %d records", s, n)
				}
				rates["etl-join-after-restore"] = append(rates["etl-join-after-restore"], float64(n)/(float64(n)/rate-s.RestoreTime.Seconds()))
				cpus["etl-join-after-restore"] = append(cpus["etl-join-after-restore"], cpu-float64((<-restoreCPU).Microseconds())/float64(n))
			}
			bl.Close()
		}
	}
	b.StopTimer()
	base, baseCPU := median(rates["passthrough"]), median(cpus["passthrough"])
	for _, m := range []string{"passthrough", "etl", "etl-join", "etl-join-after-restore"} {
		r, c := median(rates[m]), median(cpus[m])
		if len(rates[m]) == 0 {
			continue
		}
		b.ReportMetric(r, m+"-rec/s")
		b.ReportMetric(c, m+"-cpu-µs/rec")
		if m != "passthrough" && base > 0 {
			b.ReportMetric(r/base, m+"/passthrough")
			b.ReportMetric(baseCPU/c, m+"/passthrough-by-cpu")
		}
		fmt.Printf("rounds=%d records=%d table=%d %-24s median %8.0f records/s (%.2f of passthrough) over %.0f; CPU %.2f µs a record (passthrough/this %.2f) over %.2f\n",
			b.N, n, rows, m, r, r/base, rates[m], c, baseCPU/c, cpus[m])
	}
}

// BenchmarkJoinProcess is the per-record CPU cost of the etl join on a
// datagen record, without a broker: evaluate the key, find the row among
// 1,000,000 held in memory (EOS_BENCH_TABLE_ROWS), check and read the two
// of its fields the map names, and build the output. Records cycle
// through the table's keys, and are prefetched 128 at a time as the
// worker does. It runs the etl twice, interleaved 4,096
// records at a time: as it is (fast), and with its fast paths off
// (machine: every field decoded for the expression machine and its result
// encoded, as before etl_fast.go), and reports each one's CPU time a
// record, the thread's, which leaves out the time it waited for a core on
// a shared machine (cpu-ns/rec-fast, cpu-ns/rec-machine).
//
//	go test ./topologies -run '^$' -bench JoinProcess -benchmem
func BenchmarkJoinProcess(b *testing.B) {
	rows := benchTableRows()
	cfg := filepath.Join(b.TempDir(), "join.yaml")
	body := "topology: etl\njoin: {table: tbl, key: _key, as: row}\nmap:\n  owner: row.user\n  list_price: row.amount\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	fast, err := NewETL(cfg)
	if err != nil {
		b.Fatal(err)
	}
	machine := referenceETL(b, cfg)
	// A table each, with the same rows: fast stores them prepared
	// (checked once, cut to the fields read), machine raw, as before.
	tb, mtb := fast.join.table, machine.join.table
	tb.nparts, mtb.nparts = 6, 6
	part := kgo.StickyKeyPartitioner(nil).ForTopic("tbl")
	ts := time.UnixMilli(1_700_000_000_000)
	for p := range int32(6) {
		tb.owned[p], mtb.owned[p] = &tablePart{}, &tablePart{}
	}
	recs := make([]pipeline.Record, rows)
	krecs := make([]*kgo.Record, rows) // for Prefetch, as the worker gives them
	for i := range rows {
		k := strconv.FormatInt(i, 10)
		v := datagen.Value(i, ts, 100)
		p := int32(part.Partition(&kgo.Record{Key: []byte(k)}, 6))
		tb.owned[p].rows.put([]byte(k), tb.stored(v))
		mtb.owned[p].rows.put([]byte(k), mtb.stored(v))
		recs[i] = pipeline.Record{Topic: "in", Partition: p, Offset: i, Key: []byte(k), Value: v}
		krecs[i] = &kgo.Record{Topic: "in", Partition: p, Offset: i, Key: recs[i].Key, Value: v}
	}
	var out discard
	ctx := context.Background()
	paths := []*ETL{fast, machine}
	var spent [2]time.Duration
	var done [2]int
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	next := 0
	for i := 0; i < b.N; {
		k := (i / 4096) % 2
		c0, _ := threadCPU()
		for j := 0; j < 4096 && i < b.N; j, i = j+1, i+1 {
			if j%pipeline.PrefetchAhead == 0 && next+pipeline.PrefetchAhead <= int(rows) {
				paths[k].Prefetch(krecs[next : next+pipeline.PrefetchAhead])
			}
			if err := paths[k].Process(ctx, &recs[next], &out); err != nil {
				b.Fatal(err)
			}
			next = (next + 1) % int(rows)
			done[k]++
		}
		c1, _ := threadCPU()
		spent[k] += c1 - c0
	}
	for k, name := range []string{"fast", "machine"} {
		if done[k] > 0 {
			b.ReportMetric(float64(spent[k].Nanoseconds())/float64(done[k]), "cpu-ns/rec-"+name)
		}
	}
}

// benchJoinModes are the modes of BenchmarkJoinThroughput, or those
// EOS_BENCH_MODES lists (EOS_BENCH_MODES=etl-join for a profile of the
// join alone).
func benchJoinModes() []string {
	if m := os.Getenv("EOS_BENCH_MODES"); m != "" {
		return strings.Split(m, ",")
	}
	return []string{"passthrough", "etl", "etl-join"}
}
