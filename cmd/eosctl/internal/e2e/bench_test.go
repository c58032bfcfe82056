package e2e

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/twmb/franz-go/pkg/kadm"
)

// eosctl bench, as a user runs it: copiers as child processes (eosctl run,
// eosctl bench baseline and eosctl bench bare), a table on stdout, and every
// requested file, well-formed, with the ratios taken from the modes' runs
// and every output verified exactly once.
func TestBenchRunsBothModesAsProcessesAndWritesEveryFile(t *testing.T) {
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }
	cmd := exec.Command(eosctl, "bench", "--records", "20000", "--sizes", "100", "--intervals", "50ms", "--repeat", "1",
		"--partitions", "2", "--latency-rate", "1000", "--latency-duration", "300ms",
		"--json", out("b.json"), "--csv", out("b.csv"), "--chart", out("b.svg"), "--chart", out("b.png"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("eosctl bench: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"vs base", "vs bare", " bare ", "50ms", "1/1", "wrote " + out("b.png")} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	var rep struct {
		Params struct {
			Broker  string `json:"broker"`
			RTT     string `json:"rtt"`
			Command string `json:"command"`
			Copiers string `json:"copiers"`
		} `json:"params"`
		Cells []struct {
			Modes map[string]struct {
				RPS     float64 `json:"rps"`
				CPU     float64 `json:"cpu_s_per_m"`
				PeakRSS float64 `json:"peak_rss_mib"`
			} `json:"modes"`
			Ratios map[string]struct {
				Median float64 `json:"median"`
			} `json:"ratios"`
			Runs []struct {
				Mode     string `json:"mode"`
				Verified bool   `json:"verified"`
			} `json:"runs"`
		} `json:"cells"`
	}
	b, err := os.ReadFile(out("b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("b.json: %v", err)
	}
	if rep.Params.Broker != "embedded" || rep.Params.RTT != "1ms" || !strings.Contains(rep.Params.Command, "bench") || len(rep.Cells) != 1 ||
		!strings.HasPrefix(rep.Params.Copiers, "child processes") {
		t.Fatalf("b.json: %+v", rep)
	}
	c := rep.Cells[0]
	base, eos, bare := c.Modes["baseline"], c.Modes["eos"], c.Modes["bare"]
	if ratio := c.Ratios["eos/baseline"].Median; base.RPS <= 0 || eos.RPS <= 0 || ratio != eos.RPS/base.RPS {
		t.Fatalf("ratio %v is not eos %v / baseline %v (one round)", ratio, eos.RPS, base.RPS)
	}
	if vs := c.Ratios["eos/bare"].Median; bare.RPS <= 0 || vs != eos.RPS/bare.RPS || bare.CPU <= 0 || bare.PeakRSS <= 0 {
		t.Fatalf("bare: %v rec/s, eos/bare %v, %v CPU s/M, %v MiB", bare.RPS, vs, bare.CPU, bare.PeakRSS)
	}
	if len(c.Runs) != 3 {
		t.Fatalf("%d runs, want baseline, bare and eos", len(c.Runs))
	}
	for _, r := range c.Runs {
		if !r.Verified {
			t.Fatalf("the %s run's output was not verified exactly once", r.Mode)
		}
	}
	// Child processes: their own peak RSS, far below the broker's process.
	if eos.PeakRSS <= 0 || base.PeakRSS <= 0 || eos.CPU <= 0 {
		t.Fatalf("the copier processes' RSS (%v, %v MiB) and CPU (%v s/M) were not measured", eos.PeakRSS, base.PeakRSS, eos.CPU)
	}
	f, err := os.Open(out("b.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if rows, err := csv.NewReader(f).ReadAll(); err != nil || len(rows) != 2 {
		t.Fatalf("b.csv: %d rows, %v", len(rows), err)
	}
	for _, name := range []string{"b.svg", "b.png"} {
		if st, err := os.Stat(out(name)); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// Bad bench flags fail at once with exit code 2, one line, and no file.
func TestBenchBadFlagsAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "b.json")
	for _, tc := range []struct {
		name string
		args []string
		has  string
	}{
		{"negative interval", []string{"--intervals", "100ms,-10ms"}, `interval "-10ms" must be positive`},
		{"unparsable interval", []string{"--intervals", "soon"}, `interval "soon"`},
		{"unknown topology", []string{"--topology", "nosuch"}, `unknown topology "nosuch"`},
		{"zero records", []string{"--records", "0"}, "--records must be positive"},
		{"zero repeat", []string{"--repeat", "0"}, "--repeat must be positive"},
		{"bad size", []string{"--sizes", "0"}, "record size 0"},
		{"unknown mode", []string{"--modes", "baseline,fast"}, `mode "fast"`},
		{"a topology it cannot judge", []string{"--topology", "wordcount"}, "wordcount's output has no judge here"},
		{"bare with the aggregate", []string{"--topology", "aggregate", "--modes", "bare,eos"}, "stateless copy loop"},
		{"rtt with brokers", []string{"--brokers", "127.0.0.1:1", "--rtt", "5ms"}, "--rtt is injected by the embedded broker"},
		{"bad budget", []string{"--eos-overhead-budget", "80%"}, "at most 50%"},
		{"bad chart", []string{"--chart", filepath.Join(dir, "b.gif")}, ".svg or .png"},
		{"missing directory", []string{"--csv", filepath.Join(dir, "no", "b.csv")}, "directory does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(eosctl, append(append([]string{"bench"}, tc.args...), "--json", js)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			msg := strings.TrimSpace(stderr.String())
			if !ok || ee.ExitCode() != 2 || strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "eosctl: ") || !strings.Contains(msg, tc.has) {
				t.Fatalf("exit %v, stderr %q; want exit 2 and one line containing %q", err, msg, tc.has)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("took %s: bad flags must fail before any run", time.Since(start))
			}
			if _, err := os.Stat(js); !os.IsNotExist(err) {
				t.Fatalf("a failed bench left %s behind", js)
			}
		})
	}
	// The auto-only flags of eosctl run need --commit-interval auto.
	cmd := exec.Command(eosctl, "run", "passthrough", "--brokers", "127.0.0.1:1", "--app", "a", "--instance", "0",
		"--input", "i", "--output", "o", "--eos-overhead-budget", "2%")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "only applies with --commit-interval auto") {
		t.Fatalf("run --eos-overhead-budget without auto: %v, %q", err, stderr.String())
	}
}

// eosctl bench --topology passthrough,aggregate is one command for both
// topologies: each runs in turn with the modes given that run it (baseline,
// a stateless copy loop, the passthrough only, and the command says so) and
// the sizes that apply (--sizes is the passthrough's; the aggregate's
// input has its own records),
// judged its own way (a copy, every window), with its own table and its own
// files named for it; a topology none of the modes runs fails before
// anything runs.
func TestBenchRunsBothTopologiesFromOneCommand(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "b.json")
	cmd := exec.Command(eosctl, "bench", "--topology", "passthrough,aggregate", "--modes", "baseline,eos", "--sizes", "100,1024", "--records", "3000",
		"--intervals", "100ms", "--repeat", "1", "--partitions", "2", "--latency-rate", "500", "--latency-duration", "300ms", "--json", jsonPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("eosctl bench: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"passthrough topology", "aggregate topology", "wrote " + filepath.Join(dir, "b-passthrough.json"), "wrote " + filepath.Join(dir, "b-aggregate.json")} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, want := range []string{"the aggregate topology runs eos of --modes (baseline do not run it)", "--sizes applies to the passthrough only"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	for _, topology := range []string{"passthrough", "aggregate"} {
		var rep struct {
			Params struct {
				Topology string `json:"topology"`
			} `json:"params"`
			Cells []struct {
				Runs []struct {
					Mode     string `json:"mode"`
					Verified bool   `json:"verified"`
				} `json:"runs"`
			} `json:"cells"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "b-"+topology+".json"))
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			t.Fatal(err)
		}
		// passthrough's cells are its default sizes (--sizes would be
		// refused for the aggregate), the aggregate's one.
		cells := map[string]int{"passthrough": 2, "aggregate": 1}[topology]
		modes := map[string][]string{"passthrough": {"baseline", "eos"}, "aggregate": {"eos"}}[topology]
		ok := rep.Params.Topology == topology && len(rep.Cells) == cells
		for _, c := range rep.Cells {
			var ran []string
			for _, r := range c.Runs {
				ok = ok && r.Verified
				ran = append(ran, r.Mode)
			}
			slices.Sort(ran)
			ok = ok && slices.Equal(ran, modes)
		}
		if !ok {
			t.Errorf("b-%s.json: %+v, want %d cell(s) of %s, each with a verified run of %v", topology, rep, cells, topology, modes)
		}
	}
	if _, err := os.Stat(jsonPath); err == nil {
		t.Errorf("%s was written; with two topologies each has its own file", jsonPath)
	}

	// No mode of baseline,bare runs the aggregate: refused before the
	// passthrough runs, so nothing is written.
	code, _, errs := runEosctlEnv(t, nil, "bench", "--topology", "passthrough,aggregate", "--modes", "baseline,bare", "--json", filepath.Join(dir, "c.json"))
	if code != 2 || !strings.Contains(errs, "--modes: none of baseline,bare runs the aggregate topology") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming the aggregate's refusal", code, errs)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "c*")); len(m) != 0 {
		t.Fatalf("a refused bench wrote %v", m)
	}
}

// eosctl bench follows the broker rules of every command: EOSCTL_BROKERS
// alone (no --brokers) names the cluster it measures, not the embedded
// broker; the table's first line names the brokers and where they came
// from, the JSON too, and the topics it created there are gone afterwards.
// Its table reads at a glance: no line of the table itself is wider than
// 120 columns, the order of the modes rotates between rounds and is
// printed, and a latency phase too short for a p99.9 says "few" instead of
// a number. --rtt, the embedded broker's, is refused with EOSCTL_BROKERS
// as with --brokers.
func TestBenchHonoursEOSCTLBrokersAndPrintsANarrowTable(t *testing.T) {
	e := newEnv(t, broker.Config{})
	addrs := strings.Join(e.b.Addrs(), ",")
	env := append(os.Environ(), "EOSCTL_BROKERS="+addrs)

	bad := exec.Command(eosctl, "bench", "--rtt", "5ms")
	bad.Env = env
	var stderr bytes.Buffer
	bad.Stderr = &stderr
	if err := bad.Run(); err == nil || bad.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "cannot be used with brokers named by EOSCTL_BROKERS") {
		t.Fatalf("bench --rtt with EOSCTL_BROKERS: %v, %q; want exit 2 naming EOSCTL_BROKERS", err, stderr.String())
	}

	jsonPath := filepath.Join(t.TempDir(), "b.json")
	cmd := exec.Command(eosctl, "bench", "--modes", "bare,eos", "--records", "5000", "--sizes", "100", "--intervals", "50ms",
		"--repeat", "2", "--partitions", "2", "--latency-rate", "1000", "--latency-duration", "300ms", "--json", jsonPath)
	cmd.Env = env
	var stdout bytes.Buffer
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("eosctl bench: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(stdout.String(), "\n")
	if want := "brokers " + addrs + " (from EOSCTL_BROKERS)"; !strings.HasPrefix(lines[0], want) {
		t.Fatalf("the table's first line %q does not start with %q", lines[0], want)
	}
	if !strings.Contains(stdout.String(), "order of modes by round (rotated each round): 1: bare,eos; 2: eos,bare") {
		t.Errorf("the table does not print the rotated order:\n%s", stdout.String())
	}
	rows := 0
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 3 && (f[0] == "interval" || f[0] == "50ms") {
			rows++
			if len(l) > 120 {
				t.Errorf("a table line is %d columns wide, over 120:\n%s", len(l), l)
			}
			// 300 samples: too few for a p99 or a p99.9.
			if f[0] == "50ms" && !strings.Contains(l, "/few/few") {
				t.Errorf("a row with 300 latency samples prints a p99 or p99.9: %q", l)
			}
		}
	}
	if rows != 3 {
		t.Fatalf("%d table lines (header and rows), want 3:\n%s", rows, stdout.String())
	}
	var rep struct {
		Params struct {
			Broker      string   `json:"broker"`
			Brokers     []string `json:"brokers"`
			BrokersFrom string   `json:"brokers_from"`
			TopicPrefix string   `json:"topic_prefix"`
			Orders      []string `json:"orders"`
		} `json:"params"`
		Cells []struct {
			Runs []struct {
				Mode     string  `json:"mode"`
				Round    int     `json:"round"`
				Seq      int     `json:"seq"`
				RPS      float64 `json:"rps"`
				EventRPS float64 `json:"event_rps"`
				Verified bool    `json:"verified"`
			} `json:"runs"`
		} `json:"cells"`
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	p := rep.Params
	if p.Broker != "external" || strings.Join(p.Brokers, ",") != addrs || p.BrokersFrom != "EOSCTL_BROKERS" || p.TopicPrefix == "" {
		t.Fatalf("params: %+v; want the external brokers %s from EOSCTL_BROKERS", p, addrs)
	}
	if len(rep.Cells) != 1 || len(rep.Cells[0].Runs) != 4 {
		t.Fatalf("want one cell of 4 runs: %+v", rep.Cells)
	}
	for _, r := range rep.Cells[0].Runs {
		first := map[int]string{1: "bare", 2: "eos"}[r.Round]
		if !r.Verified || r.RPS <= 0 || r.EventRPS <= 0 || (r.Seq == 1) != (r.Mode == first) {
			t.Fatalf("run %+v: want verified, both clocks measured, and %s first in round %d", r, first, r.Round)
		}
	}
	topics, err := kadm.NewClient(e.cl).ListTopics(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, p.TopicPrefix) {
			t.Fatalf("topic %s of the benchmark is still on the cluster", name)
		}
	}
}
