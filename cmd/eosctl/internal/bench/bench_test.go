package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/pipeline"
)

// tinyConfig is a benchmark small enough for the test suite: seconds, not
// minutes. Its figures mean nothing; its shape is what the tests check.
func tinyConfig() Config {
	return Config{
		Intervals:       []Interval{{Fixed: 40 * time.Millisecond}, {Auto: true}},
		Sizes:           []int{200},
		Records:         4000,
		Partitions:      3,
		Repeat:          2,
		RTT:             time.Millisecond,
		LatencyRate:     2000,
		LatencyDuration: 300 * time.Millisecond,
		InProcess:       true,
		RunTimeout:      30 * time.Second,
	}
}

// A short in-process benchmark produces a report whose every file is
// well-formed, whose runs alternate the three modes, each verified exactly
// once, and whose ratios are the medians of the per-round ratios of the
// measured runs, not constants.
func TestShortBenchWritesEveryOutputFromBothModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := tinyConfig()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 2 {
		t.Fatalf("got %d cells, want 2 (40ms and auto)", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		checkCell(t, c, cfg)
		checkOrder(t, c)
	}
	checkParams(t, rep.Params)
	if want := []string{"baseline,bare,eos", "bare,eos,baseline"}; !slices.Equal(rep.Params.Orders, want) {
		t.Fatalf("params: orders %v, want %v", rep.Params.Orders, want)
	}

	dir := t.TempDir()
	files := map[string]func(string) error{
		"bench.json": func(p string) error { return WriteFile(p, func(w io.Writer) error { return WriteJSON(w, rep) }) },
		"bench.csv":  func(p string) error { return WriteFile(p, func(w io.Writer) error { return WriteCSV(w, rep) }) },
		"bench.svg":  func(p string) error { return WriteChart(p, rep) },
		"bench.png":  func(p string) error { return WriteChart(p, rep) },
	}
	for name, write := range files {
		if err := write(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	checkJSON(t, filepath.Join(dir, "bench.json"), rep)
	checkCSV(t, filepath.Join(dir, "bench.csv"), rep)
	checkSVG(t, filepath.Join(dir, "bench.svg"))
	checkPNG(t, filepath.Join(dir, "bench.png"))
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"interval", "40ms", "auto", "rtt 1ms", "bare", "vs bare", "2/2"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

func checkCell(t *testing.T, c Cell, cfg Config) {
	t.Helper()
	if len(c.Runs) != len(AllModes)*cfg.Repeat || c.Rounds != cfg.Repeat {
		t.Fatalf("cell %s: %d runs over %d rounds, want %d over %d", c.Interval, len(c.Runs), c.Rounds, len(AllModes)*cfg.Repeat, cfg.Repeat)
	}
	var ratios, bareRatios []float64
	for round := 1; round <= cfg.Repeat; round++ {
		b, okb := findRun(c.Runs, round, ModeBaseline)
		e, oke := findRun(c.Runs, round, ModeEOS)
		x, okx := findRun(c.Runs, round, ModeBare)
		if !okb || !oke || !okx {
			t.Fatalf("cell %s round %d lacks a mode (baseline %v, bare %v, eos %v)", c.Interval, round, okb, okx, oke)
		}
		for _, r := range []RunResult{b, x, e} {
			if !r.Verified || r.Duplicates != 0 || r.Missing != 0 {
				t.Fatalf("cell %s round %d %s: output not verified exactly once (%d duplicates, %d missing)", c.Interval, round, r.Mode, r.Duplicates, r.Missing)
			}
			if r.RPS <= 0 || r.Commits == 0 || r.CommittedRec < cfg.Records {
				t.Fatalf("cell %s round %d %s: %.0f rec/s from %d commits of %d records", c.Interval, round, r.Mode, r.RPS, r.Commits, r.CommittedRec)
			}
			want := int(float64(cfg.LatencyRate) * cfg.LatencyDuration.Seconds())
			if r.E2ESamples < want || r.E2EP50Ms <= 0 || r.E2EP99Ms < r.E2EP50Ms || r.E2EMaxMs < r.E2EP99Ms {
				t.Fatalf("cell %s round %d %s: %d latency samples (want %d), p50 %.2f p99 %.2f max %.2f", c.Interval, round, r.Mode, r.E2ESamples, want, r.E2EP50Ms, r.E2EP99Ms, r.E2EMaxMs)
			}
			if r.CPUSeconds <= 0 || r.PeakRSSMiB <= 0 {
				t.Fatalf("cell %s round %d %s: CPU %.3fs, peak RSS %.1f MiB; both must be measured", c.Interval, round, r.Mode, r.CPUSeconds, r.PeakRSSMiB)
			}
		}
		ratios = append(ratios, e.RPS/b.RPS)
		bareRatios = append(bareRatios, e.RPS/x.RPS)
	}
	ratio, bareRatio, bare := c.Ratio(ModeEOS, ModeBaseline), c.Ratio(ModeEOS, ModeBare), c.Modes[ModeBare]
	if want := median(ratios); math.Abs(ratio.Median-want) > 1e-12 {
		t.Fatalf("cell %s: ratio %v, but the median of the per-round eos/baseline ratios is %v", c.Interval, ratio.Median, want)
	}
	if want := median(bareRatios); math.Abs(bareRatio.Median-want) > 1e-12 || bare.RPS <= 0 || bare.CPUSecPerM <= 0 {
		t.Fatalf("cell %s: eos/bare %v (bare %.0f rec/s, %.2f CPU s/M), but the median of the per-round ratios is %v", c.Interval, bareRatio.Median, bare.RPS, bare.CPUSecPerM, want)
	}
	if math.Abs(c.LossPct-(1-ratio.Median)*100) > 1e-9 || ratio.Min > ratio.Median || ratio.Max < ratio.Median {
		t.Fatalf("cell %s: loss %.3f%%, ratio %+v", c.Interval, c.LossPct, ratio)
	}
	for _, m := range []Mode{ModeBaseline, ModeBare, ModeEOS} {
		if f := c.Modes[m]; f.Runs != cfg.Repeat || f.Verified != cfg.Repeat || f.RPS <= 0 || f.CommitP99Ms <= 0 || f.E2EP99Ms <= 0 || f.PeakRSSMiB <= 0 {
			t.Fatalf("cell %s: %s figures %+v", c.Interval, m, f)
		}
	}
	if c.Interval == "auto" {
		b, _ := findRun(c.Runs, 1, ModeBaseline)
		x, _ := findRun(c.Runs, 1, ModeBare)
		e, _ := findRun(c.Runs, 1, ModeEOS)
		if b.Interval != "auto" || x.Interval != "auto" || e.OpenP50Ms <= 0 {
			t.Fatalf("auto cell: baseline run labelled %q, bare %q, eos open time %.1f ms", b.Interval, x.Interval, e.OpenP50Ms)
		}
	}
}

func checkParams(t *testing.T, p Params) {
	t.Helper()
	if p.Cores <= 0 || !strings.HasPrefix(p.GoVersion, "go") || p.Broker != "embedded" || p.RTT != "1ms" || p.RTTMs != 1 ||
		p.Topology != "passthrough" || p.Repeat != 2 || len(p.Records) != 1 || p.Records[0] != 4000 || p.Copiers == "" || p.CPUScope == "" {
		t.Fatalf("params incomplete: %+v", p)
	}
}

func checkJSON(t *testing.T, path string, rep *Report) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Params map[string]any   `json:"params"`
		Cells  []map[string]any `json:"cells"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("bench.json is not JSON: %v", err)
	}
	for _, k := range []string{"cores", "go_version", "broker", "rtt", "rtt_ms", "topology", "partitions"} {
		if _, ok := doc.Params[k]; !ok {
			t.Errorf("bench.json params lack %q", k)
		}
	}
	if len(doc.Cells) != len(rep.Cells) {
		t.Fatalf("bench.json has %d cells, want %d", len(doc.Cells), len(rep.Cells))
	}
	for _, k := range []string{"interval", "size", "modes", "ratios", "loss_pct", "runs"} {
		if _, ok := doc.Cells[0][k]; !ok {
			t.Errorf("bench.json cells lack %q", k)
		}
	}
	modes, _ := doc.Cells[0]["modes"].(map[string]any)
	for _, m := range []string{"baseline", "bare", "eos"} {
		f, _ := modes[m].(map[string]any)
		for _, k := range []string{"rps", "commit_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "cpu_s_per_m", "peak_rss_mib"} {
			if _, ok := f[k]; !ok {
				t.Errorf("bench.json cells' %s figures lack %q", m, k)
			}
		}
	}
	ratios, _ := doc.Cells[0]["ratios"].(map[string]any)
	r, _ := ratios["eos/baseline"].(map[string]any)
	if got, _ := r["median"].(float64); got != rep.Cells[0].Ratio(ModeEOS, ModeBaseline).Median {
		t.Errorf("bench.json ratio %v, report %v", got, rep.Cells[0].Ratio(ModeEOS, ModeBaseline))
	}
}

func checkCSV(t *testing.T, path string, rep *Report) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("bench.csv: %v", err)
	}
	if len(rows) != 1+len(rep.Cells) || rows[0][0] != "interval" {
		t.Fatalf("bench.csv has %d rows starting %v, want a header and %d cells", len(rows), rows[0], len(rep.Cells))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for i, c := range rep.Cells {
		row := rows[i+1]
		ratio, err := strconv.ParseFloat(row[col["eos_vs_baseline"]], 64)
		want := c.Ratio(ModeEOS, ModeBaseline).Median
		if err != nil || ratio != want || row[col["interval"]] != c.Interval {
			t.Fatalf("bench.csv row %d: %v (ratio %q), want interval %s ratio %v", i+1, row, row[col["eos_vs_baseline"]], c.Interval, want)
		}
		for name, want := range map[string]float64{"bare_rps": c.Modes[ModeBare].RPS, "eos_commit_p50_ms": c.Modes[ModeEOS].CommitP50Ms,
			"baseline_peak_rss_mib": c.Modes[ModeBaseline].PeakRSSMiB} {
			if got, err := strconv.ParseFloat(row[col[name]], 64); err != nil || got != want {
				t.Fatalf("bench.csv row %d: %s %q, want %v", i+1, name, row[col[name]], want)
			}
		}
	}
	for _, name := range rows[0] {
		if strings.HasSuffix(name, "_") || name == "" {
			t.Fatalf("bench.csv has a column without a name: %q", rows[0])
		}
	}
}

func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("bench.svg is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" || !bytes.Contains(b, []byte("eos auto")) || !bytes.Contains(b, []byte("40ms")) {
		t.Fatalf("bench.svg: root <%s>, legend or interval ticks missing", root)
	}
}

// checkPNG decodes the chart at path, requires a readable size, and
// returns it.
func checkPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("bench.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 300 {
		t.Fatalf("bench.png is %dx%d, too small to read", b.Dx(), b.Dy())
	}
	return img
}

// Bad configurations fail before anything is started, each with an error
// that names the problem and wraps eos.ErrConfig.
func TestBadConfigurationsAreClearErrors(t *testing.T) {
	if _, err := ParseIntervals("10ms,-5ms"); !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "-5ms") {
		t.Errorf("negative interval: %v", err)
	}
	if _, err := ParseIntervals("soon"); !errors.Is(err, eos.ErrConfig) {
		t.Errorf("unparsable interval: %v", err)
	}
	if _, err := ParseSizes("100,big"); !errors.Is(err, eos.ErrConfig) {
		t.Errorf("unparsable size: %v", err)
	}
	if _, err := ParseModes("baseline,fast"); !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "fast") {
		t.Errorf("unknown mode: %v", err)
	}
	if _, err := ParseModes("eos,bare,eos"); !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate mode: %v", err)
	}
	if ms, err := ParseModes(" bare, eos "); err != nil || !slices.Equal(ms, []Mode{ModeBare, ModeEOS}) {
		t.Errorf("ParseModes(bare,eos) = %v, %v", ms, err)
	}
	for name, c := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"unknown topology":   {func(c *Config) { c.Topology = "nosuch" }, "nosuch"},
		"negative records":   {func(c *Config) { c.Records = -1 }, "records"},
		"zero interval":      {func(c *Config) { c.Intervals = []Interval{{Fixed: 0}} }, "interval"},
		"duplicate interval": {func(c *Config) { c.Intervals = []Interval{{Auto: true}, {Auto: true}} }, "twice"},
		"zero size":          {func(c *Config) { c.Sizes = []int{0} }, "size"},
		"rtt with brokers":   {func(c *Config) { c.Brokers = []string{"kafka:9092"} }, "rtt"},
		"negative rtt":       {func(c *Config) { c.RTT = -time.Millisecond }, "rtt"},
		"budget too large":   {func(c *Config) { c.OverheadBudget = 0.9 }, "budget"},
		"wordcount":          {func(c *Config) { c.Topology = "wordcount" }, "no judge"},
		"bare aggregate":     {func(c *Config) { c.Topology, c.Modes, c.Sizes = "aggregate", []Mode{ModeBare, ModeEOS}, nil }, "bare"},
		"auto without eos":   {func(c *Config) { c.Modes = []Mode{ModeBaseline, ModeBare} }, "auto"},
		"duplicate mode":     {func(c *Config) { c.Modes = []Mode{ModeEOS, ModeEOS} }, "modes"},
		"negative repeat":    {func(c *Config) { c.Repeat = -1 }, "repeat"},
	} {
		cfg := tinyConfig()
		c.mod(&cfg)
		start := time.Now()
		_, err := Run(context.Background(), cfg)
		if !errors.Is(err, eos.ErrConfig) || !strings.Contains(strings.ToLower(err.Error()), c.want) {
			t.Errorf("%s: Run returned %v, want an eos.ErrConfig naming %q", name, err, c.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: rejecting the configuration took %s; it must fail before starting anything", name, d)
		}
	}
}

// A bad report file is a configuration error naming its Config field,
// found before the benchmark starts rather than after its last run.
func TestBadReportPathsNameTheirField(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "b")
	for _, c := range []struct {
		mod     func(*Config)
		setting string
	}{
		{func(c *Config) { c.ChartPaths = []string{"b.gif"} }, "bench.Config.ChartPaths"},
		{func(c *Config) { c.ChartPaths = []string{missing + ".png"} }, "bench.Config.ChartPaths"},
		{func(c *Config) { c.JSONPath = missing + ".json" }, "bench.Config.JSONPath"},
		{func(c *Config) { c.CSVPath = missing + ".csv" }, "bench.Config.CSVPath"},
	} {
		cfg := tinyConfig()
		c.mod(&cfg)
		start := time.Now()
		_, err := Run(context.Background(), cfg)
		var ce *eos.ConfigError
		if !errors.As(err, &ce) || ce.Setting != c.setting {
			t.Errorf("Run returned %v, want an *eos.ConfigError for %s", err, c.setting)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: rejecting the configuration took %s; it must fail before starting anything", c.setting, d)
		}
	}
}

// The drain figures leave out the last commit, whose transaction idled
// until its interval ran out once the backlog was gone, and count only the
// records of the full commits over their own time.
func TestDrainThroughputLeavesOutTheIdleTail(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(endMs, durMs, commitMs, consumed int) pipeline.Event {
		return pipeline.Event{Kind: pipeline.EventCommitted, Time: t0.Add(time.Duration(endMs) * time.Millisecond),
			Duration: time.Duration(durMs) * time.Millisecond, CommitDuration: time.Duration(commitMs) * time.Millisecond, Consumed: consumed}
	}
	// 3 full commits of 1000 records each 100ms after the first record at
	// t0, then the tail: 10 records and 95ms of waiting for nothing.
	commits := []pipeline.Event{ev(300, 100, 5, 1000), ev(100, 100, 5, 1000), ev(200, 100, 5, 1000), ev(400, 100, 5, 10)}
	st := drain(commits, 3010)
	if st.shortWindow || st.commits != 3 || st.window != 300*time.Millisecond {
		t.Fatalf("window %s over %d commits (short %v), want 300ms over 3", st.window, st.commits, st.shortWindow)
	}
	if st.rps != 10000 {
		t.Fatalf("%.1f records/s, want 3000 records in 300ms = 10000", st.rps)
	}
	if math.Abs(st.overhead-0.05) > 1e-9 || st.commitP50 != 5*time.Millisecond || st.openP50 != 95*time.Millisecond {
		t.Fatalf("overhead %.4f, commit p50 %s, open p50 %s; want 0.05, 5ms, 95ms", st.overhead, st.commitP50, st.openP50)
	}
	// Commits past the backlog (the latency phase's) are not drain figures.
	if st2 := drain(append(commits, ev(900, 100, 50, 7)), 3010); st2.rps != st.rps || st2.commitP99 != st.commitP99 {
		t.Fatalf("a commit after the backlog changed the drain figures: %+v", st2)
	}
}

func TestQuantileAndMedian(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if q := quantile(ds, 0.5); q != 50*time.Millisecond {
		t.Errorf("p50 of 1..100ms is %s, want 50ms", q)
	}
	if q := quantile(ds, 0.99); q != 99*time.Millisecond {
		t.Errorf("p99 of 1..100ms is %s, want 99ms", q)
	}
	if q := quantile(ds, 1); q != 100*time.Millisecond {
		t.Errorf("max of 1..100ms is %s", q)
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median of 1,2,3,10 is %v, want 2.5", m)
	}
}

// checkOrder checks that the runs of c ran in RoundOrder: round 2 rotated,
// so that eos does not always run first or last; in an auto cell eos runs
// first until it has chosen the interval the others use. Every run's
// rec/s came from the broker's clock over 10%-90% of the backlog, with
// the copier's own figure beside it.
func checkOrder(t *testing.T, c Cell) {
	t.Helper()
	for round := 1; round <= 2; round++ {
		want := RoundOrder(AllModes, round)
		if c.Interval == "auto" && round == 1 {
			want = []Mode{ModeEOS, ModeBaseline, ModeBare}
		}
		for seq, m := range want {
			r, ok := findRun(c.Runs, round, m)
			if !ok || r.Seq != seq+1 {
				t.Fatalf("cell %s round %d: %s ran %d-th, want %d-th of %v", c.Interval, round, m, r.Seq, seq+1, want)
			}
			if r.WindowS <= 0 || r.EventRPS <= 0 {
				t.Fatalf("cell %s round %d %s: clock window %.3fs, event rps %.0f", c.Interval, round, m, r.WindowS, r.EventRPS)
			}
		}
	}
}
