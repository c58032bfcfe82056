package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runEosctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runEosctlEnv(t, nil, args...)
}

// runEosctlEnv is runEosctl with extra environment variables (KEY=VALUE;
// empty ones are skipped).
func runEosctlEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(eosctl, args...)
	cmd.Env = os.Environ()
	for _, kv := range env {
		if kv != "" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// `eosctl topology list|check` and bad topology input: documented exit
// codes, one-line errors naming file, line and reason, nothing written.
func TestTopologyCommandsAndBadConfigs(t *testing.T) {
	e := newEnv(t, broker.Config{})
	addr := e.b.Addrs()[0]
	e.produce("tc-in", 10, 1, 0)
	before := e.topics()
	write := writer(t)
	good := write("good.yaml", "topology: etl\nfilter: amount > 1\n")
	bad := write("bad.yaml", "topology: etl\nfilter: amount >\n")
	anon := write("anon.yaml", "filter: amount > 1\n")

	code, out, _ := runEosctl(t, "topology", "list")
	for _, want := range []string{"passthrough", "etl", "aggregate", "wordcount", "group_by, time, window", "filter, map, project"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("topology list: exit %d, output %q lacks %q", code, out, want)
		}
	}
	code, out, _ = runEosctl(t, "topology", "list", "--json")
	var list []struct {
		Name       string   `json:"name"`
		ConfigKeys []string `json:"config_keys"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 4 {
		t.Fatalf("topology list --json: exit %d, %q", code, out)
	}
	if code, out, _ = runEosctl(t, "topology", "check", "--config", good); code != 0 || strings.TrimSpace(out) != good+": ok (etl)" {
		t.Fatalf("check of a good config: exit %d, %q", code, out)
	}
	nilcmp := write("nilcmp.yaml", "topology: etl\nfilter: $env.discount > 0\n")
	code, out, errs := runEosctl(t, "topology", "check", "--config", nilcmp)
	if code != 0 || strings.TrimSpace(out) != nilcmp+": ok (etl)" || !strings.HasPrefix(errs, "warning: "+nilcmp+":2: filter:") || !strings.Contains(errs, "($env.discount ?? 0)") {
		t.Fatalf("check of a comparison with a possibly absent field: exit %d, stdout %q, stderr %q; want ok and a warning suggesting a default", code, out, errs)
	}
	for _, tc := range []struct {
		name string
		args []string
		has  string
	}{
		{"check bad", []string{"topology", "check", "--config", bad}, bad + `:2: filter: expression "amount >" does not compile`},
		{"check unnamed", []string{"topology", "check", "--config", anon}, "does not say which topology"},
		{"check wrong name", []string{"topology", "check", "aggregate", "--config", good}, "configures the etl topology, not aggregate"},
		{"check no config", []string{"topology", "check"}, "--config FILE is required"},
		{"run bad config", []string{"run", "etl", "--brokers", addr, "--app", "tc", "--instance", "0", "--input", "tc-in", "--output", "tc-out", "--config", bad}, bad + ":2: filter:"},
		{"run missing config", []string{"run", "aggregate", "--brokers", addr, "--app", "tc", "--instance", "0", "--input", "tc-in", "--output", "tc-out"}, "--config: a configuration file is required"},
		{"wordcount with config", []string{"run", "wordcount", "--brokers", addr, "--app", "tc", "--instance", "0", "--input", "tc-in", "--output", "tc-out", "--config", good}, "--config: the wordcount topology takes no configuration file"},
		{"dlq is the input", []string{"run", "etl", "--brokers", addr, "--app", "tc", "--instance", "0", "--input", "tc-in", "--output", "tc-out", "--config", good, "--dlq", "tc-in"}, "named twice"},
		{"consume missing topic", []string{"consume", "--brokers", addr, "--topic", "tc-nosuch"}, `topic "tc-nosuch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runEosctl(t, tc.args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code != 2 || !strings.HasPrefix(last, "eosctl: ") || !strings.Contains(last, tc.has) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line containing %q", code, stderr, tc.has)
			}
		})
	}
	e.requireNoNewTopics(before, "bad input")
}

// `eosctl run etl` as a user runs it: the config and --dlq flags reach the
// worker, kept and routed records land in their topics once, poison pills in
// the named dead-letter topic with the etl topology's name, and `eosctl
// consume` prints what a read_committed consumer sees.
func TestETLRunWritesOutputsAndNamedDeadLetterTopic(t *testing.T) {
	const n = 20_000
	e := newEnv(t, broker.Config{})
	e.produce("etlr-in", n, 3, 0)
	var poison []*kgo.Record
	for _, v := range []string{"nope", `{"seq":1}`, `[]`} {
		poison = append(poison, &kgo.Record{Topic: "etlr-in", Value: []byte(v)})
	}
	if err := e.cl.ProduceSync(e.ctx, poison...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs("../../../../topologies/examples/etl-big-orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e.topologyWorker("etl", "etlr", 0, "etlr-in", "etlr-out", "--config", cfg, "--dlq", "etlr-rejects")
	e.waitCaughtUp("etlr", time.Minute, "etlr-in")
	e.stop()
	kept, big := 0, 0
	for i := range int64(n) {
		if a := datagen.Amount(i); a >= 10 {
			kept++
			if a >= 90 {
				big++
			}
		}
	}
	count := func(topic string) []*kgo.Record {
		rs, err := committed.Read(e.ctx, e.opts, topic)
		if err != nil {
			t.Fatal(err)
		}
		return committed.Flatten(rs)
	}
	if got := len(count("etlr-out")); got != kept-big {
		t.Fatalf("etlr-out has %d records, want %d", got, kept-big)
	}
	if got := len(count("orders-big")); got != big {
		t.Fatalf("orders-big has %d records, want %d", got, big)
	}
	dl := count("etlr-rejects")
	if len(dl) != len(poison) {
		t.Fatalf("%d dead letters in etlr-rejects, want %d", len(dl), len(poison))
	}
	for _, r := range dl {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if h[pipeline.DeadLetterTopologyHeader] != "etl" || h[pipeline.DeadLetterTopicHeader] != "etlr-in" || h[pipeline.DeadLetterReasonHeader] == "" {
			t.Fatalf("dead letter headers %v", h)
		}
	}
	code, out, stderr := runEosctl(t, "consume", "--brokers", e.b.Addrs()[0], "--topic", "orders-big", "--max", "3", "--headers")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], `"size":"big"`) || !strings.Contains(lines[0], pipeline.IdempotencyKeyHeader+"=etlr-in/") {
		t.Fatalf("consume: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	t.Logf("%d records: %d kept (%d routed to orders-big), %d dead letters", n+len(poison), kept, big, len(dl))
}
