package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/eosctl/eos"
)

// WriteTable writes the report as the table `eosctl bench` prints: one row
// per cell and mode, medians over rounds, and each mode's throughput as a
// ratio to the others' (medians of per-round ratios), in at most about 120
// columns: the essential figures only. WriteWideTable adds the rest; the
// JSON has every run. Its advice names settings as bench.Config's fields.
func WriteTable(w io.Writer, r *Report) error { return writeTable(w, r, false) }

// WriteWideTable is WriteTable with every column: the ratios' spread over
// rounds, transaction rate, flush time, commit overhead and e2e max.
func WriteWideTable(w io.Writer, r *Report) error { return writeTable(w, r, true) }

// tableColumn is a column of the table: shown says whether the run has it,
// wide that only the wide table does.
type tableColumn struct {
	head  string
	wide  bool
	shown bool
	cell  func(c Cell, m Mode, st tableRow) string
}

func tableColumns(p Params, wide bool) []tableColumn {
	ran := func(m Mode) bool { return slices.Contains(p.Modes, m) }
	agg := p.Topology == topologyAggregate
	ratio := func(num func(Mode) bool, den Mode) func(Cell, Mode, tableRow) string {
		return func(c Cell, m Mode, _ tableRow) string {
			if m == den || !num(m) {
				return "-"
			}
			xs := roundRatios(c.Runs, m, den)
			if wide {
				return ratioCell(xs)
			}
			if len(xs) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", median(xs))
		}
	}
	everyMode := func(Mode) bool { return true }
	// The JVM peers report no commits: their transaction rate, commit
	// timings and overhead are unknown, not zero.
	commits := func(f func(tableRow) string) func(Cell, Mode, tableRow) string {
		return func(_ Cell, m Mode, st tableRow) string {
			if m.jvm() {
				return "-"
			}
			return f(st)
		}
	}
	return []tableColumn{
		{head: "threads", shown: len(p.Threads) > 1, cell: func(c Cell, _ Mode, _ tableRow) string { return strconv.Itoa(c.Threads) }},
		{head: "interval", shown: true, cell: func(c Cell, _ Mode, _ tableRow) string { return c.Interval }},
		{head: "size", shown: true, cell: func(c Cell, _ Mode, _ tableRow) string { return sizeLabel(c.Size) }},
		{head: "mode", shown: true, cell: func(_ Cell, m Mode, _ tableRow) string { return string(m) }},
		{head: "rec/s", shown: true, cell: func(_ Cell, _ Mode, st tableRow) string { return grouped(st.rps) }},
		{head: "vs base", shown: ran(ModeBaseline), cell: ratio(everyMode, ModeBaseline)},
		{head: "vs bare", shown: ran(ModeBare), cell: ratio(func(m Mode) bool { return m == ModeEOS }, ModeBare)},
		{head: "vs ks", shown: ran(ModeKStreams), cell: ratio(Mode.isEOS, ModeKStreams)},
		{head: "txn/s", wide: true, shown: true, cell: commits(func(st tableRow) string { return fmt.Sprintf("%.1f", st.txnPerSec) })},
		{head: "commit p50/p99", shown: true, cell: commits(func(st tableRow) string { return msPair(st.commitP50, st.commitP99) })},
		{head: "flush p50", wide: true, shown: true, cell: commits(func(st tableRow) string { return fmtMs(st.flushP50) })},
		{head: "overhead %", wide: true, shown: true, cell: commits(func(st tableRow) string { return fmt.Sprintf("%.1f", st.overhead) })},
		// An aggregate has no latency phase (see the note below the
		// table): no e2e columns.
		{head: "e2e p50/p99/p99.9", shown: !agg, cell: func(_ Cell, _ Mode, st tableRow) string {
			return fmtMs(st.e2eP50) + "/" + e2eQuantile(st.e2eP99, st.samples, 0.99) + "/" + e2eQuantile(st.e2eP999, st.samples, 0.999)
		}},
		{head: "e2e max", wide: true, shown: !agg, cell: func(_ Cell, _ Mode, st tableRow) string { return fmtMs(st.e2eMax) }},
		{head: "e2e n", shown: !agg, cell: func(_ Cell, _ Mode, st tableRow) string { return grouped(float64(st.samples)) }},
		{head: "CPU s/M", shown: true, cell: func(_ Cell, _ Mode, st tableRow) string { return fmt.Sprintf("%.2f", st.cpuPerM) }},
		{head: "RSS MiB", shown: true, cell: func(_ Cell, _ Mode, st tableRow) string { return fmt.Sprintf("%.0f", st.rss) }},
		{head: "ok", shown: true, cell: func(_ Cell, _ Mode, st tableRow) string { return st.verified }},
	}
}

// e2eMinSamples is the fewest latency samples a q-quantile is reported
// from: ten samples above it (1,000 for p99, 10,000 for p99.9). From fewer,
// the "p99.9" is the maximum of a handful, and says nothing a reader could
// compare.
func e2eMinSamples(q float64) int { return int(math.Ceil(10/(1-q) - 1e-9)) }

// e2eQuantile formats a latency quantile, or "few" when samples are too
// few for it (see e2eMinSamples).
func e2eQuantile(v float64, samples int, q float64) string {
	if samples < e2eMinSamples(q) {
		return "few"
	}
	return fmtMs(v)
}

// fmtMs formats milliseconds compactly: one decimal below 100.
func fmtMs(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func msPair(a, b float64) string { return fmtMs(a) + "/" + fmtMs(b) }

// brokerLine says which brokers the run measured, and why.
func brokerLine(p Params) string {
	if p.Broker != "external" {
		return fmt.Sprintf("embedded broker (no bench.Config.Brokers), rtt %s", p.RTT)
	}
	s := "brokers " + strings.Join(p.Brokers, ",")
	if p.BrokersFrom != "" {
		s += " (from " + p.BrokersFrom + ")"
	}
	return s
}

// tableWidth is the widest line the table writes: its prose wraps there,
// and its columns (without --wide) stay within it for the default modes.
const tableWidth = 120

func writeTable(out io.Writer, r *Report, wide bool) error {
	p := r.Params
	var head, notes strings.Builder
	w := &head
	fmt.Fprintf(w, "%s; %s topology, %d partitions, %d worker(s), %d round(s); %d cores, %s\n",
		brokerLine(p), p.Topology, p.Partitions, p.Workers, p.Repeat, p.Cores, p.GoVersion)
	if len(p.Orders) > 0 {
		var rounds []string
		for i, o := range p.Orders {
			rounds = append(rounds, fmt.Sprintf("%d: %s", i+1, o))
		}
		fmt.Fprintf(w, "order of modes by round (rotated each round): %s\n", strings.Join(rounds, "; "))
	}
	if wide {
		fmt.Fprintf(w, "copiers as %s\n", p.Copiers)
	}
	if p.NoIdempotencyKey {
		fmt.Fprintln(w, "eos ran without the idempotency-key header (bench.Config.NoIdempotencyKey)")
	}
	for _, line := range settingsLines(p) {
		fmt.Fprintln(w, line)
	}
	if _, err := io.WriteString(out, wrapLines(head.String(), tableWidth)); err != nil {
		return err
	}
	var cols []tableColumn
	for _, c := range tableColumns(p, wide) {
		if c.shown && (wide || !c.wide) {
			cols = append(cols, c)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	var line strings.Builder
	for _, c := range cols {
		line.WriteString(c.head + "\t")
	}
	fmt.Fprintln(tw, line.String())
	for _, c := range r.Cells {
		for _, m := range modesOf(c, p.Modes) {
			st := modeStats(c.Runs, m)
			line.Reset()
			for _, col := range cols {
				line.WriteString(col.cell(c, m, st) + "\t")
			}
			fmt.Fprintln(tw, line.String())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	note := "times in ms; rec/s by one clock for every mode: the group's committed offsets read from the broker, between 10% and 90% of the backlog; ratios: medians of per-round ratios"
	if !wide {
		note += " (bench.WriteWideTable or bench.Config.JSONPath for their spread and every other figure)"
	}
	fmt.Fprintln(&notes, note)
	writeNotes(&notes, r)
	_, err := io.WriteString(out, wrapLines(notes.String(), tableWidth))
	return err
}

// wrapLines wraps every line of s longer than width at spaces, indenting
// the continuation by two spaces.
func wrapLines(s string, width int) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		nl := strings.HasSuffix(line, "\n")
		line = strings.TrimSuffix(line, "\n")
		n := 0
		for i, word := range strings.Split(line, " ") {
			switch {
			case i == 0:
			case n+1+len(word) > width:
				b.WriteString("\n  ")
				n = 2
			default:
				b.WriteByte(' ')
				n++
			}
			b.WriteString(word)
			n += len(word)
		}
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// writeNotes writes what the table's cells need said: modes without some
// figures, the aggregate's ratios, the auto cells' verdicts, and warnings.
func writeNotes(w io.Writer, r *Report) {
	p := r.Params
	if slices.ContainsFunc(p.Modes, Mode.jvm) {
		fmt.Fprintln(w, "JVM modes (kstreams: Kafka Streams with exactly_once_v2; javaloop: a hand-written Java transactional copy loop; -defaults: with their clients' defaults instead of eos's settings) run one JVM per worker; their progress is their group's committed offsets read from the broker, so they have no txn/s, commit timings or overhead (-); their CPU counts from when each JVM printed started, after its warm-up")
	}
	for _, c := range r.Cells {
		for _, pc := range c.Peers {
			if pc.EOSVs > 0 {
				fmt.Fprintf(w, "eos vs %s (threads %d, %s, size %s): %s (%.3f-%.3f)\n", pc.Mode, c.Threads, c.Interval, sizeLabel(c.Size),
					strconv.FormatFloat(pc.EOSVs, 'f', 3, 64), pc.EOSVsMin, pc.EOSVsMax)
			}
		}
	}
	if p.Topology == topologyAggregate {
		fmt.Fprintln(w, "aggregate: aggcheck.Input (orders, late records, poison pills; size -), judged by aggcheck.Judge (every window and dead letter exactly once); no e2e latency: a window's result is written when its grace period has passed in event time, so the delay from an order to its result is the input's, not the processor's")
	}
	if p.Topology == topologyDedup {
		fmt.Fprintf(w, "dedup: %s, every record a distinct key (held to the end), judged by verify (every key exactly once, in order); no e2e latency: a worker with state reads one input, so there is no live input\n", strings.TrimSpace(strings.ReplaceAll(dedupConfig, "\n", "; ")))
	}
	for _, c := range r.Cells {
		if c.EOSVsNoPreagg > 0 {
			fmt.Fprintf(w, "threads %d, %s: eos / eos-nopreagg %.3f (what pre-aggregating before the repartition topic is worth)", c.Threads, c.Interval, c.EOSVsNoPreagg)
			if c.EOSNoPreaggVsKStreams > 0 {
				fmt.Fprintf(w, "; eos-nopreagg / kstreams %.3f (the engines on the same algorithm)", c.EOSNoPreaggVsKStreams)
			}
			fmt.Fprintln(w)
		}
	}
	few := false
	for _, c := range r.Cells {
		for _, run := range c.Runs {
			few = few || (!noLatencyPhase(p.Topology) && run.E2ESamples < e2eMinSamples(0.999))
		}
	}
	if few {
		fmt.Fprintf(w, "few: fewer latency samples than a quantile needs (%s for a p99, %s for a p99.9: ten above it); raise bench.Config.LatencyDuration or bench.Config.LatencyRate\n",
			grouped(float64(e2eMinSamples(0.99))), grouped(float64(e2eMinSamples(0.999))))
	}
	if p.TopicPrefix != "" {
		fmt.Fprintf(w, "topics and groups %s-* were created on %s for this run and deleted\n", p.TopicPrefix, strings.Join(p.Brokers, ","))
	}
	for _, a := range r.Auto {
		verdict := "no fixed interval in the sweep met the budget"
		if a.BestFixed != "" {
			verdict = fmt.Sprintf("best fixed interval within budget: %s (e2e p99 %.1f ms); auto's e2e p99 is %.2fx that", a.BestFixed, a.BestE2EP99Ms, a.LatencyVsBest)
		}
		fmt.Fprintf(w, "auto, %d bytes: commit overhead %.2f%% lightly loaded, %.2f%% draining, against a %.1f%% budget (interval settled at %.0f ms and %.0f ms); %s\n",
			a.Size, a.LiveOverheadPct, a.DrainOverheadPct, a.BudgetPct, a.LiveOpenP50Ms, a.DrainOpenP50Ms, verdict)
	}
	var short []string
	for _, c := range r.Cells {
		for _, run := range c.Runs {
			if run.ShortWindow {
				short = append(short, fmt.Sprintf("%s/%s/%s", run.Mode, run.Interval, sizeLabel(run.Size)))
			}
		}
	}
	var queued []string
	for _, c := range r.Cells {
		for _, run := range c.Runs {
			if !noLatencyPhase(p.Topology) && p.LatencyRate > 0 && run.RPS > 0 && float64(p.LatencyRate) > run.RPS/2 {
				queued = append(queued, fmt.Sprintf("%s/%s/%d round %d (%s rec/s)", run.Mode, run.Interval, run.Size, run.Round, grouped(run.RPS)))
			}
		}
	}
	if len(queued) > 0 {
		fmt.Fprintf(w, "warning: the latency phase's %d rec/s is over half the drain throughput of %d run(s) (%s): their e2e figures include a queue; lower bench.Config.LatencyRate\n",
			p.LatencyRate, len(queued), strings.Join(queued, ", "))
	}
	if len(short) > 0 {
		fmt.Fprintf(w, "warning: in %d run(s) one commit carried the group past both 10%% and 90%% of the backlog (%s): their rec/s is timed from the run's start, start-up included; raise bench.Config.Records\n",
			len(short), strings.Join(short, ", "))
	}
}

// sizeLabel is a cell's record size for the table: "-" for the aggregate
// topology's cells (size 0), whose input has its own records.
func sizeLabel(size int) string {
	if size == 0 {
		return "-"
	}
	return strconv.Itoa(size)
}

// modesOf returns the modes that ran in c, in the order of the run's modes.
func modesOf(c Cell, order []Mode) []Mode {
	if len(order) == 0 {
		order = AllModes
	}
	var out []Mode
	for _, m := range order {
		if slices.ContainsFunc(c.Runs, func(r RunResult) bool { return r.Mode == m }) {
			out = append(out, m)
		}
	}
	return out
}

// tableRow is one mode of one cell: medians over its rounds.
type tableRow struct {
	rps, txnPerSec, commitP50, commitP99, flushP50, overhead float64
	e2eP50, e2eP99, e2eP999, e2eMax, cpuPerM, rss            float64
	samples                                                  int // the fewest of its rounds
	verified                                                 string
}

func modeStats(runs []RunResult, m Mode) tableRow {
	var rs []RunResult
	for _, r := range runs {
		if r.Mode == m {
			rs = append(rs, r)
		}
	}
	med := func(f func(RunResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	ok := 0
	for _, r := range rs {
		if r.Verified {
			ok++
		}
	}
	row := tableRow{
		rps:       med(func(r RunResult) float64 { return r.RPS }),
		txnPerSec: med(func(r RunResult) float64 { return r.TxnPerSec }),
		commitP50: med(func(r RunResult) float64 { return r.CommitP50Ms }),
		commitP99: med(func(r RunResult) float64 { return r.CommitP99Ms }),
		flushP50:  med(func(r RunResult) float64 { return r.FlushP50Ms }),
		overhead:  med(func(r RunResult) float64 { return r.OverheadPct }),
		e2eP50:    med(func(r RunResult) float64 { return r.E2EP50Ms }),
		e2eP99:    med(func(r RunResult) float64 { return r.E2EP99Ms }),
		e2eP999:   med(func(r RunResult) float64 { return r.E2EP999Ms }),
		cpuPerM:   med(func(r RunResult) float64 { return r.CPUSecPerM }),
		verified:  fmt.Sprintf("%d/%d", ok, len(rs)),
	}
	for i, r := range rs {
		if i == 0 || r.E2ESamples < row.samples {
			row.samples = r.E2ESamples
		}
		row.e2eMax = max(row.e2eMax, r.E2EMaxMs)
		row.rss = max(row.rss, r.PeakRSSMiB)
	}
	return row
}

// ratioCell formats the median of per-round ratios and their spread.
func ratioCell(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f (%.3f-%.3f)", median(xs), minOf(xs), maxOf(xs))
}

// grouped formats n with thousands separators.
func grouped(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// WriteJSON writes the whole report, runs included, as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// csvColumns are the cell fields of the CSV file, by their JSON names.
var csvColumns = []string{
	"interval", "size", "threads", "records", "rounds",
	"baseline_rps", "baseline_rps_min", "baseline_rps_max", "baseline_mbps",
	"eos_rps", "eos_rps_min", "eos_rps_max", "eos_mbps",
	"ratio", "ratio_min", "ratio_max", "loss_pct",
	"bare_rps", "bare_rps_min", "bare_rps_max", "bare_mbps",
	"eos_vs_bare", "eos_vs_bare_min", "eos_vs_bare_max", "bare_vs_baseline",
	"bare_txn_per_s", "bare_commit_p50_ms", "bare_commit_p99_ms", "bare_overhead_pct",
	"bare_e2e_p50_ms", "bare_e2e_p99_ms", "bare_e2e_max_ms", "bare_cpu_s_per_m", "bare_peak_rss_mib",
	"txn_per_s", "baseline_commits_per_s", "commit_p50_ms", "commit_p99_ms",
	"baseline_commit_p50_ms", "baseline_commit_p99_ms", "txn_p50_ms", "txn_p99_ms",
	"open_p50_ms", "baseline_open_p50_ms", "overhead_pct", "baseline_overhead_pct",
	"live_overhead_pct", "live_commit_p50_ms", "live_open_p50_ms",
	"e2e_p50_ms", "e2e_p99_ms", "e2e_p99_min_ms", "e2e_p99_max_ms", "e2e_p999_ms", "e2e_max_ms", "e2e_samples",
	"baseline_e2e_p50_ms", "baseline_e2e_p99_ms", "baseline_e2e_max_ms",
	"eos_cpu_s_per_m", "baseline_cpu_s_per_m", "eos_peak_rss_mib", "baseline_peak_rss_mib",
	"kstreams_rps", "kstreams_rps_min", "kstreams_rps_max", "kstreams_mbps",
	"eos_vs_kstreams", "eos_vs_kstreams_min", "eos_vs_kstreams_max",
	"kstreams_e2e_p50_ms", "kstreams_e2e_p99_ms", "kstreams_e2e_max_ms", "kstreams_cpu_s_per_m", "kstreams_peak_rss_mib",
	"eos_nopreagg_rps", "eos_nopreagg_rps_min", "eos_nopreagg_rps_max", "eos_nopreagg_vs_kstreams", "eos_vs_eos_nopreagg",
	"eos_nopreagg_cpu_s_per_m", "eos_nopreagg_peak_rss_mib",
	"aborted", "reinits",
}

// WriteCSV writes one row per cell with the columns of csvColumns, the
// same names and values as the JSON cells.
func WriteCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumns); err != nil {
		return err
	}
	for _, c := range r.Cells {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		row := make([]string, len(csvColumns))
		for i, k := range csvColumns {
			switch v := m[k].(type) {
			case string:
				row[i] = v
			case float64:
				row[i] = strconv.FormatFloat(v, 'f', -1, 64)
			default:
				row[i] = fmt.Sprint(v)
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// checkReportPaths checks Config.JSONPath, CSVPath and ChartPaths before
// the benchmark starts (see Config).
func (c *Config) checkReportPaths() error {
	for _, p := range c.ChartPaths {
		if err := CheckChartPath(p); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		setting string
		paths   []string
	}{
		{"bench.Config.JSONPath", []string{c.JSONPath}},
		{"bench.Config.CSVPath", []string{c.CSVPath}},
		{"bench.Config.ChartPaths", c.ChartPaths},
	} {
		for _, p := range f.paths {
			if p == "" {
				continue
			}
			if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
				return eos.BadConfig(f.setting, "cannot write %s: its directory does not exist", p)
			}
		}
	}
	return nil
}

// WriteFile writes path through fn atomically: to a temporary file in the
// same directory, renamed into place only once fn succeeded, so that a
// failed write never leaves half a file behind.
func WriteFile(path string, fn func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := fn(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
