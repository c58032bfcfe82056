package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
)

// A worker started before the producer of its input waits for the topic,
// says so, and copies it once it appears (the README's aggregate section
// starts both at once); a topic that never appears is bad input once the
// wait is over.
func TestRunWaitsForItsInputTopic(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.worker("late", 0, "late-in", "late-out")
	e.eventually(20*time.Second, "the worker says it waits", func() (bool, string) {
		logs := e.logs.String()
		return strings.Contains(logs, `waiting for it to be created" app=late instance=0 topic=late-in`), logs
	})
	e.produce("late-in", 1000, 3, 0)
	e.waitCaughtUp("late", time.Minute, "late-in")
	e.stop()
	e.requireExactlyOnce("late-in", "late-out", nil, 1000)

	code, _, errs := e.cli("run", "passthrough", "--app", "never", "--instance", "0", "--input", "never-in", "--output", "never-out", "--input-wait", "1s", "--metrics-addr", "")
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != 2 || !strings.Contains(lines[0], "waiting for it to be created") || !strings.HasSuffix(lines[len(lines)-1], `topic "never-in": topic does not exist (waited 1s for it to be created)`) {
		t.Fatalf("exit %d, stderr %q; want exit 2, the wait, and a last line naming the topic and the wait", code, errs)
	}
}
