package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/reconcile"
)

// TestReconcileCommandFindsRepairsAndIsWatched: `eosctl reconcile` naming a
// group with no offsets for the topic exits 2; over a table `eosctl sink`
// wrote it exits 0; after a row is deleted, one planted and
// one edited it exits 5 and its --json report names each; --repair puts
// the missing row back and nothing else; --watch exports the last-success
// timestamp and the discrepancy counts, and stops with 0 on SIGTERM.
func TestReconcileCommandFindsRepairsAndIsWatched(t *testing.T) {
	kind := dbtest.Postgres
	e := newEnv(t, broker.Config{})
	dsn := dbtest.Fresh(t, kind)
	db := dbtest.Open(t, dsn)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE events (seq BIGINT PRIMARY KEY, usr TEXT NOT NULL, amount DOUBLE PRECISION)"); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	e.produce("rc-in", n, 2, 0)
	mapping := writer(t)("events.yaml", sinkMapping)
	e.sinkProc(0, dsn, mapping, "rc", "rc-in")
	e.waitStored(db, "rc", "rc-in", n, time.Minute)
	e.stop()

	run := func(extra ...string) (int, string) {
		t.Helper()
		var out strings.Builder
		cmd := exec.CommandContext(e.ctx, eosctl, append([]string{"reconcile",
			"--brokers", e.b.Addrs()[0], "--to", dsn, "--mapping", mapping, "--input", "rc-in", "--group", "rc"}, extra...)...)
		cmd.Stdout, cmd.Stderr = &out, e.LogWriter("reconcile")
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String()
	}
	report := func(extra ...string) (int, reconcile.Report) {
		t.Helper()
		code, out := run(append(extra, "--json")...)
		var rep reconcile.Report
		if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rep); err != nil {
			t.Fatalf("reconcile --json printed %q: %v", out, err)
		}
		return code, rep
	}
	if code, out := run("--group", "not-the-sinks"); code != 2 {
		t.Fatalf("reconcile with a group that has no offsets for the topic: exit %d (%s), want 2", code, out)
	}
	if code, rep := report("--from", "0"); code != 0 || !rep.Clean() || rep.Keys != n {
		t.Fatalf("reconcile of the sink's table: exit %d, %+v; want 0, clean, %d keys", code, rep, n)
	}
	for _, q := range []string{"DELETE FROM events WHERE seq = 5", "INSERT INTO events VALUES (777777, 'planted', 1)", "UPDATE events SET amount = -1 WHERE seq = 6"} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	code, rep := report("--from", "0")
	if code != 5 || len(rep.Missing) != 1 || rep.Missing[0].Key != "5" || len(rep.Extra) != 1 || rep.Extra[0].Key != "777777" ||
		len(rep.Changed) != 1 || rep.Changed[0].Key != "6" || rep.Changed[0].Column != "amount" {
		t.Fatalf("after planting: exit %d, %+v; want 5 and missing 5, extra 777777, changed 6.amount", code, rep)
	}
	if code, rep := report("--from", "0", "--repair"); code != 5 || rep.Repaired != 1 {
		t.Fatalf("--repair: exit %d, repaired %d; want 5 (it still reports what it found) and 1", code, rep.Repaired)
	}
	if code, rep := report("--from", "0"); code != 5 || len(rep.Missing) != 0 || len(rep.Extra) != 1 || len(rep.Changed) != 1 {
		t.Fatalf("after --repair: exit %d, %+v; want the extra and changed rows still there, untouched", code, rep)
	}

	addr, err := broker.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	watch := exec.CommandContext(e.ctx, eosctl, "reconcile", "--brokers", e.b.Addrs()[0], "--to", dsn, "--mapping", mapping,
		"--input", "rc-in", "--group", "rc", "--from", "0", "--watch", "300ms", "--metrics-addr", addr)
	watch.Stdout, watch.Stderr = io.Discard, e.LogWriter("watch")
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	metric := func(text, name string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	var last float64
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text := string(b)
			last = metric(text, reconcile.MetricLastSuccess)
			extra := metric(text, reconcile.MetricDiscrepancies+`{kind="extra",name="events/rc-in"}`)
			if last > float64(time.Now().Add(-time.Minute).Unix()) && extra == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("--watch: last success %v, no extra discrepancy exported within 30s", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = watch.Process.Signal(syscall.SIGTERM)
	_ = watch.Wait()
	if code := watch.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("reconcile --watch exited %d after SIGTERM, want 0", code)
	}
}
