package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
)

// Bad input fails with the documented exit code and one line on stderr, and
// writes nothing.
func TestBadInputGivesOneLineErrorsAndDocumentedExitCodes(t *testing.T) {
	waitsInParallel(t)
	e := newEnv(t, broker.Config{})
	addr := e.b.Addrs()[0]
	e.produce("cli-in", 10, 1, 0)
	before := e.topics()
	mute := silentListener(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		has  string
	}{
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"unknown flag", []string{"produce", "--nope"}, 2, "unknown flag"},
		{"missing instance", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--input", "cli-in", "--output", "o"}, 2, `"instance" not set`},
		{"empty instance", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "", "--input", "cli-in", "--output", "o"}, 2, "--instance: id is empty"},
		{"invalid instance", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "pod/1", "--input", "cli-in", "--output", "o"}, 2, "character '/'"},
		{"too long instance", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", strings.Repeat("x", 250), "--input", "cli-in", "--output", "o"}, 2, "limit of 249"},
		{"input is output", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "cli-in"}, 2, "named twice"},
		{"unknown topology", []string{"run", "nosuch", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "o"}, 2, `unknown topology "nosuch"`},
		{"bad duration", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "o", "--commit-interval", "soon"}, 2, "invalid argument"},
		{"negative interval", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "o", "--commit-interval", "-1s"}, 2, "must be positive"},
		{"zero interval", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "o", "--commit-interval", "0s"}, 2, "must be positive"},
		{"negative input wait", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "o", "--input-wait", "-1s"}, 2, "--input-wait: must not be negative, got -1s"},
		{"negative session timeout", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "o", "--session-timeout", "-1s"}, 2, "--session-timeout: must not be negative, got -1s"},
		{"negative max txn records", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-in", "--output", "o", "--max-txn-records", "-1"}, 2, "--max-txn-records: must not be negative, got -1"},
		{"quickstart no workers", []string{"quickstart", "--workers", "0"}, 2, "--workers"},
		{"quickstart zero interval", []string{"quickstart", "--commit-interval", "0s"}, 2, "--commit-interval must be positive"},
		{"broker port not a number", []string{"broker", "--listen", "127.0.0.1:notaport", "--data-dir", ""}, 2, "invalid port"},
		{"broker no nodes", []string{"broker", "--nodes", "0", "--data-dir", ""}, 2, "--nodes must be between 1 and 16"},
		{"missing input topic", []string{"run", "passthrough", "--brokers", addr, "--app", "a", "--instance", "0", "--input", "cli-nosuch", "--output", "cli-o2", "--input-wait", "0"}, 2, `"cli-nosuch"`},
		{"zero records", []string{"produce", "--brokers", addr, "--topic", "cli-p", "--count", "0"}, 2, "eosctl: --count: must be positive, got 0"},
		{"negative rate", []string{"produce", "--brokers", addr, "--topic", "cli-p", "--count", "1", "--rate", "-1"}, 2, "eosctl: --rate: must not be negative, got -1"},
		{"verify missing topic", []string{"verify", "--brokers", addr, "--input", "cli-in", "--output", "cli-none"}, 2, `topic "cli-none"`},
		{"refused brokers", []string{"verify", "--brokers", "127.0.0.1:1", "--input", "a", "--output", "b"}, 1, "cannot reach brokers 127.0.0.1:1"},
		{"silent brokers verify", []string{"verify", "--brokers", mute, "--timeout", "2s", "--input", "a", "--output", "b"}, 1, "no answer within 2s"},
		{"silent brokers run", []string{"run", "passthrough", "--brokers", mute, "--timeout", "2s", "--app", "a", "--instance", "0", "--input", "a", "--output", "b"}, 1, "no answer within 2s"},
		{"silent brokers produce", []string{"produce", "--brokers", mute, "--timeout", "2s", "--topic", "a", "--count", "1"}, 1, "no answer within 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(eosctl, tc.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			msg := strings.TrimSpace(stderr.String())
			lines := strings.Split(msg, "\n")
			last := lines[len(lines)-1]
			if code != tc.code || len(lines) != 1 || !strings.Contains(last, tc.has) || !strings.HasPrefix(last, "eosctl: ") {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line containing %q", code, msg, tc.code, tc.has)
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("took %s: bad input must fail fast", time.Since(start))
			}
		})
	}
	e.requireNoNewTopics(before, "bad input")
}
