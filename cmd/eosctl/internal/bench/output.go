package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
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
	cell  func(c Cell, m Mode, st ModeFigures) string
}

func tableColumns(p Params, wide bool) []tableColumn {
	ran := func(m Mode) bool { return slices.Contains(p.Modes, m) }
	noE2E := noLatencyPhase(p.Topology)
	ratio := func(num func(Mode) bool, den Mode) func(Cell, Mode, ModeFigures) string {
		return func(c Cell, m Mode, _ ModeFigures) string {
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
	commits := func(f func(ModeFigures) string) func(Cell, Mode, ModeFigures) string {
		return func(_ Cell, m Mode, st ModeFigures) string {
			if m.jvm() {
				return "-"
			}
			return f(st)
		}
	}
	return []tableColumn{
		{head: "threads", shown: len(p.Threads) > 1, cell: func(c Cell, _ Mode, _ ModeFigures) string { return strconv.Itoa(c.Threads) }},
		{head: "interval", shown: true, cell: func(c Cell, _ Mode, _ ModeFigures) string { return c.Interval }},
		{head: "size", shown: true, cell: func(c Cell, _ Mode, _ ModeFigures) string { return sizeLabel(c.Size) }},
		{head: "mode", shown: true, cell: func(_ Cell, m Mode, _ ModeFigures) string { return string(m) }},
		{head: "rec/s", shown: true, cell: func(_ Cell, _ Mode, st ModeFigures) string { return grouped(st.RPS) }},
		{head: "vs base", shown: ran(ModeBaseline), cell: ratio(everyMode, ModeBaseline)},
		{head: "vs bare", shown: ran(ModeBare), cell: ratio(func(m Mode) bool { return m == ModeEOS }, ModeBare)},
		{head: "vs ks", shown: ran(ModeKStreams), cell: ratio(Mode.isEOS, ModeKStreams)},
		{head: "vs json", shown: ran(ModeEOSAvro) && ran(ModeEOS), cell: ratio(func(m Mode) bool { return m == ModeEOSAvro }, ModeEOS)},
		{head: "txn/s", wide: true, shown: true, cell: commits(func(st ModeFigures) string { return fmt.Sprintf("%.1f", st.TxnPerSec) })},
		{head: "commit p50/p99", shown: true, cell: commits(func(st ModeFigures) string { return msPair(st.CommitP50Ms, st.CommitP99Ms) })},
		{head: "flush p50", wide: true, shown: true, cell: commits(func(st ModeFigures) string { return fmtMs(st.FlushP50Ms) })},
		{head: "overhead %", wide: true, shown: true, cell: commits(func(st ModeFigures) string { return fmt.Sprintf("%.1f", st.OverheadPct) })},
		// The aggregate, dedup, join and etl have no latency phase (see the
		// notes below the table): no e2e columns.
		{head: "e2e p50/p99/p99.9", shown: !noE2E, cell: func(_ Cell, _ Mode, st ModeFigures) string {
			return fmtMs(st.E2EP50Ms) + "/" + e2eQuantile(st.E2EP99Ms, st.E2ESamples, 0.99) + "/" + e2eQuantile(st.E2EP999Ms, st.E2ESamples, 0.999)
		}},
		{head: "e2e max", wide: true, shown: !noE2E, cell: func(_ Cell, _ Mode, st ModeFigures) string { return fmtMs(st.E2EMaxMs) }},
		{head: "e2e n", shown: !noE2E, cell: func(_ Cell, _ Mode, st ModeFigures) string { return grouped(float64(st.E2ESamples)) }},
		{head: "CPU s/M", shown: true, cell: func(_ Cell, _ Mode, st ModeFigures) string { return fmt.Sprintf("%.2f", st.CPUSecPerM) }},
		{head: "RSS MiB", shown: true, cell: func(_ Cell, _ Mode, st ModeFigures) string { return fmt.Sprintf("%.0f", st.PeakRSSMiB) }},
		{head: "ok", shown: true, cell: func(_ Cell, _ Mode, st ModeFigures) string { return fmt.Sprintf("%d/%d", st.Verified, st.Runs) }},
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
			st := c.Modes[m]
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
		fmt.Fprintln(w, "JVM modes (kstreams: Kafka Streams with exactly_once_v2; javaloop: a hand-written Java transactional copy loop; -defaults: with their clients' defaults instead of eos's settings) run one JVM per worker; their progress is their group's committed offsets read from the broker, so they have no txn/s, commit timings or overhead (-); their CPU counts from each JVM's first measured record or its started line, whichever came first, after its warm-up")
	}
	for _, c := range r.Cells {
		for _, m := range []Mode{ModeKStreamsDefaults, ModeJavaLoop, ModeJavaLoopDefaults} {
			if vs := c.Ratio(ModeEOS, m); vs.Median > 0 {
				fmt.Fprintf(w, "eos vs %s (threads %d, %s, size %s): %.3f (%.3f-%.3f)\n", m, c.Threads, c.Interval, sizeLabel(c.Size),
					vs.Median, vs.Min, vs.Max)
			}
		}
	}
	if p.Topology == topologyAggregate {
		fmt.Fprintln(w, "aggregate: aggcheck.Input (orders, late records, poison pills; size -), judged by aggcheck.Judge (every window and dead letter exactly once); no e2e latency: a window's result is written when its grace period has passed in event time, so the delay from an order to its result is the input's, not the processor's")
	}
	if p.KeyHeader != "" && p.Topology != topologyDedup {
		fmt.Fprintf(w, "every backlog record carries its key in the header %s too, as dedup's input does\n", p.KeyHeader)
	}
	if p.Topology == topologyJoin {
		fmt.Fprintln(w, joinNote(p))
	}
	if p.Topology == topologyDedup {
		fmt.Fprintf(w, "dedup: %s, every record a distinct key (held to the end), judged by verify (every key exactly once, in order); no e2e latency: a worker with state reads one input, so there is no live input\n", strings.TrimSpace(strings.ReplaceAll(dedupConfig, "\n", "; ")))
	}
	if p.Topology == topologyETL {
		writeETLNotes(w, r)
	}
	for _, c := range r.Cells {
		if vs := c.Ratio(ModeEOS, ModeEOSNoPreagg).Median; vs > 0 {
			fmt.Fprintf(w, "threads %d, %s: eos / eos-nopreagg %.3f (what pre-aggregating before the repartition topic is worth)", c.Threads, c.Interval, vs)
			if ks := c.Ratio(ModeEOSNoPreagg, ModeKStreams).Median; ks > 0 {
				fmt.Fprintf(w, "; eos-nopreagg / kstreams %.3f (the engines on the same algorithm)", ks)
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

// cellColumns are the CSV columns of a cell's own fields.
var cellColumns = []string{"interval", "size", "threads", "records", "rounds", "loss_pct", "aborted", "reinits"}

// WriteCSV writes one row per cell: the cell's own fields, then each
// mode's figures as MODE_FIELD (eos_rps, bare_commit_p50_ms, ...) for the
// modes of the run in its order, then each ratio as NUM_vs_DEN with _min
// and _max (eos_vs_baseline, ...). Names and values are the JSON cells';
// a mode or ratio a cell lacks leaves its columns empty.
func WriteCSV(w io.Writer, r *Report) error {
	modes := slices.Clone(r.Params.Modes)
	var ratios []string
	for _, m := range knownModes {
		if !slices.Contains(modes, m) && slices.ContainsFunc(r.Cells, func(c Cell) bool { _, ok := c.Modes[m]; return ok }) {
			modes = append(modes, m)
		}
	}
	for _, c := range r.Cells {
		for k := range c.Ratios {
			if !slices.Contains(ratios, k) {
				ratios = append(ratios, k)
			}
		}
	}
	slices.Sort(ratios)
	figures := jsonNames(ModeFigures{})
	head := slices.Clone(cellColumns)
	for _, m := range modes {
		for _, f := range figures {
			head = append(head, string(m)+"_"+f)
		}
	}
	for _, k := range ratios {
		name := strings.Replace(k, "/", "_vs_", 1)
		head = append(head, name, name+"_min", name+"_max")
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, c := range r.Cells {
		own, err := jsonFields(c)
		if err != nil {
			return err
		}
		var row []string
		for _, k := range cellColumns {
			row = append(row, csvValue(own[k]))
		}
		for _, m := range modes {
			f, ran := c.Modes[m]
			vals, err := jsonFields(f)
			if err != nil {
				return err
			}
			for _, k := range figures {
				if !ran {
					row = append(row, "")
					continue
				}
				row = append(row, csvValue(vals[k]))
			}
		}
		for _, k := range ratios {
			if x, ok := c.Ratios[k]; ok {
				row = append(row, csvValue(x.Median), csvValue(x.Min), csvValue(x.Max))
			} else {
				row = append(row, "", "", "")
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonNames returns the JSON names of v's fields, in their order, with
// the fields of an embedded struct in its place (as encoding/json does).
func jsonNames(v any) []string { return fieldNames(reflect.TypeOf(v)) }

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, fieldNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// jsonFields returns v's fields by their JSON names, as encoding/json
// decodes them.
func jsonFields(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = json.Unmarshal(b, &m)
	return m, err
}

func csvValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
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
