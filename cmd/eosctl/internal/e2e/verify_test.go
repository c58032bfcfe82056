package e2e

import (
	"strings"
	"testing"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// verify run on output that is not a copy (an etl, aggregate or wordcount
// output: keys that are not produce's sequence numbers) fails with one line
// saying that verify judges copies of produce's data and what judges the
// rest; its help says so too.
func TestVerifyOnOutputThatIsNotACopySaysWhatItJudges(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.produce("vc-in", 100, 1, 0)
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, "vc-out", 1, nil); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for _, u := range []string{"user-1", "user-2"} {
		rs = append(rs, &kgo.Record{Topic: "vc-out", Key: []byte(u), Value: []byte(`{"orders":50}`)})
	}
	if err := e.cl.ProduceSync(e.ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := e.cli("verify", "--input", "vc-in", "--output", "vc-out")
	// Before its error, verify says what it reads (a progress line).
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(errs), "\n") {
		if strings.HasPrefix(l, "eosctl: ") {
			lines = append(lines, l)
		}
	}
	if code != 1 || len(lines) != 1 || !strings.HasSuffix(strings.TrimSpace(errs), lines[0]) || !strings.Contains(lines[0], `verify judges copies of the records "eosctl produce" writes`) || !strings.Contains(lines[0], "eosctl consume --topic vc-out") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and one line saying what verify judges", code, out, errs)
	}
	if code, help, _ := e.cli("verify", "--help"); code != 0 || !strings.Contains(squeeze(help), "Verify judges copies") {
		t.Fatalf("verify --help: exit %d, does not say what verify judges:\n%s", code, help)
	}
}
