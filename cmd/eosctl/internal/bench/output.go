package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
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
// ratio to the baseline's and eos's to the bare loop's (medians of per-round
// ratios, with their spread for eos). Its advice names settings as
// bench.Config's fields.
func WriteTable(w io.Writer, r *Report) error {
	p := r.Params
	fmt.Fprintf(w, "%s broker, rtt %s, %s topology, %d partitions, %d worker(s), %d round(s), copiers as %s; %d cores, %s\n",
		p.Broker, p.RTT, p.Topology, p.Partitions, p.Workers, p.Repeat, p.Copiers, p.Cores, p.GoVersion)
	if p.NoIdempotencyKey {
		fmt.Fprintln(w, "eos ran without the idempotency-key header (bench.Config.NoIdempotencyKey)")
	}
	for _, line := range settingsLines(p) {
		fmt.Fprintln(w, line)
	}
	threadsCol := len(p.Threads) > 1
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	withKS := slices.Contains(p.Modes, ModeKStreams)
	head := "interval\tsize\tmode\trec/s\tvs baseline (min-max)\tvs bare (min-max)\t"
	if threadsCol {
		head = "threads\t" + head
	}
	if withKS {
		head += "vs kstreams (min-max)\t"
	}
	fmt.Fprintln(tw, head+"txn/s\tcommit p50/p99 ms\tflush p50 ms\toverhead %\te2e p50/p99/max ms\tCPU s/M\tRSS MiB\tverified\t")
	for _, c := range r.Cells {
		for _, m := range modesOf(c, p.Modes) {
			st := modeStats(c.Runs, m)
			vsBase, vsBare, vsKS := "-", "-", "-"
			if m != ModeBaseline {
				vsBase = ratioCell(roundRatios(c.Runs, m, ModeBaseline))
			}
			if m == ModeEOS {
				vsBare = ratioCell(roundRatios(c.Runs, m, ModeBare))
				vsKS = ratioCell(roundRatios(c.Runs, m, ModeKStreams))
			}
			row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t", c.Interval, sizeLabel(c.Size), m, grouped(st.rps), vsBase, vsBare)
			if threadsCol {
				row = strconv.Itoa(c.Threads) + "\t" + row
			}
			if withKS {
				row += vsKS + "\t"
			}
			// Kafka Streams reports no commits: its transaction rate,
			// commit timings and overhead are unknown, not zero.
			commits := fmt.Sprintf("%.1f\t%.1f/%.1f\t%.1f\t%.1f\t", st.txnPerSec, st.commitP50, st.commitP99, st.flushP50, st.overhead)
			if m.jvm() {
				commits = "-\t-\t-\t-\t"
			}
			// An aggregate has no latency phase (see the note below the
			// table): its e2e latency is unknown, not zero.
			e2e := fmt.Sprintf("%.1f/%.1f/%.1f", st.e2eP50, st.e2eP99, st.e2eMax)
			if p.Topology == topologyAggregate {
				e2e = "-"
			}
			fmt.Fprintf(tw, "%s%s%s\t%.2f\t%.0f\t%s\t\n", row, commits,
				e2e, st.cpuPerM, st.rss, st.verified)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
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
		fmt.Fprintln(w, "aggregate: verify.AggregateInput (orders, late records, poison pills; size -), judged by verify.JudgeAggregate (every window and dead letter exactly once); rec/s counts input records until the group had consumed the input and the repartition topic; no e2e latency (-): a window's result is written when its grace period has passed in event time, so the delay from an order to its result is the input's, not the processor's")
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
			if p.Topology != topologyAggregate && p.LatencyRate > 0 && run.RPS > 0 && float64(p.LatencyRate) > run.RPS/2 {
				queued = append(queued, fmt.Sprintf("%s/%s/%d round %d (%s rec/s)", run.Mode, run.Interval, run.Size, run.Round, grouped(run.RPS)))
			}
		}
	}
	if len(queued) > 0 {
		fmt.Fprintf(w, "warning: the latency phase's %d rec/s is over half the drain throughput of %d run(s) (%s): their e2e figures include a queue; lower bench.Config.LatencyRate\n",
			p.LatencyRate, len(queued), strings.Join(queued, ", "))
	}
	if len(short) > 0 {
		fmt.Fprintf(w, "warning: %d run(s) drained their backlog in fewer than 3 commits (2 full ones and the tail) (%s); their throughput includes the last, idle transaction: raise bench.Config.Records\n",
			len(short), strings.Join(short, ", "))
	}
	return nil
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
	e2eP50, e2eP99, e2eMax, cpuPerM, rss                     float64
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
		cpuPerM:   med(func(r RunResult) float64 { return r.CPUSecPerM }),
		verified:  fmt.Sprintf("%d/%d", ok, len(rs)),
	}
	for _, r := range rs {
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
	"e2e_p50_ms", "e2e_p99_ms", "e2e_p99_min_ms", "e2e_p99_max_ms", "e2e_max_ms",
	"baseline_e2e_p50_ms", "baseline_e2e_p99_ms", "baseline_e2e_max_ms",
	"eos_cpu_s_per_m", "baseline_cpu_s_per_m", "eos_peak_rss_mib", "baseline_peak_rss_mib",
	"kstreams_rps", "kstreams_rps_min", "kstreams_rps_max", "kstreams_mbps",
	"eos_vs_kstreams", "eos_vs_kstreams_min", "eos_vs_kstreams_max",
	"kstreams_e2e_p50_ms", "kstreams_e2e_p99_ms", "kstreams_e2e_max_ms", "kstreams_cpu_s_per_m", "kstreams_peak_rss_mib",
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
