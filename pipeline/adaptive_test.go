package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/eosctl/eos"
)

func TestAdaptiveIntervalIsTheShortestWithinBudget(t *testing.T) {
	a := newAdaptiveInterval(Config{AutoInterval: true, OverheadBudget: 0.03, MaxCommitInterval: 5 * time.Second})
	if got := a.interval(); got != autoStartInterval {
		t.Fatalf("before any commit the interval is %s, want the starting %s", got, autoStartInterval)
	}
	for range 50 {
		a.observe(3 * time.Millisecond)
	}
	// Commits start every T and take c: c/T = 3% at T = 3ms / 0.03 = 100ms.
	if got, want := a.interval(), 100*time.Millisecond; got < want-time.Millisecond || got > want+time.Millisecond {
		t.Fatalf("with 3ms commits and a 3%% budget the interval is %s, want %s", got, want)
	}
	overhead := 3.0 / float64(a.interval().Milliseconds())
	if overhead > 0.031 || overhead < 0.029 {
		t.Fatalf("the chosen interval gives an overhead of %.2f%%, want 3%%", overhead*100)
	}
	// One stall does not stretch the interval for long: it counts at most
	// four times the estimate.
	a.observe(300 * time.Millisecond)
	if got := a.interval(); got > 200*time.Millisecond {
		t.Fatalf("after one 300ms commit among 3ms ones the interval is %s, want it at most doubled", got)
	}
	// Slower commits move it up, within a few commits, but never past max.
	for range 50 {
		a.observe(time.Second)
	}
	if got := a.interval(); got != 5*time.Second {
		t.Fatalf("with 1s commits the interval is %s, want the 5s maximum", got)
	}
	for range 50 {
		a.observe(time.Microsecond)
	}
	if got := a.interval(); got != minAutoInterval {
		t.Fatalf("with 1µs commits the interval is %s, want the %s floor", got, minAutoInterval)
	}
	var fixed *adaptiveInterval
	fixed.observe(time.Second) // a fixed interval ignores commit timings
}

func TestAutoIntervalConfigErrors(t *testing.T) {
	base := Config{App: "a", Instance: "0", Inputs: []string{"in"}, Output: "out", AutoInterval: true}
	w, err := New(base, TransformFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.CommitInterval(); got != autoStartInterval {
		t.Fatalf("auto starts at %s, want %s", got, autoStartInterval)
	}
	if w.cfg.OverheadBudget != DefaultOverheadBudget || w.cfg.MaxCommitInterval != DefaultMaxCommitInterval {
		t.Fatalf("defaults not applied: budget %g, max %s", w.cfg.OverheadBudget, w.cfg.MaxCommitInterval)
	}
	for name, mod := range map[string]func(*Config){
		"negative budget":       func(c *Config) { c.OverheadBudget = -0.01 },
		"budget over 50%":       func(c *Config) { c.OverheadBudget = 0.6 },
		"negative max interval": func(c *Config) { c.MaxCommitInterval = -time.Second },
		"max over txn timeout":  func(c *Config) { c.MaxCommitInterval = time.Minute; c.TransactionTimeout = 10 * time.Second },
	} {
		cfg := base
		mod(&cfg)
		if _, err := New(cfg, TransformFunc(nil)); !errors.As(err, new(*eos.ConfigError)) {
			t.Errorf("%s: New returned %v, want an *eos.ConfigError", name, err)
		}
	}
}

// Commits start an interval after the previous commit started, so that
// read_committed consumers see one every interval; a transaction never
// stays open longer than the interval.
func TestPacerCountsFromTheStartOfTheLastCommit(t *testing.T) {
	p := newPacer(Config{CommitInterval: 100 * time.Millisecond})
	began := time.Now()
	if d := p.deadline(began); d != began.Add(100*time.Millisecond) {
		t.Fatalf("first transaction: deadline %s after it began, want 100ms", d.Sub(began))
	}
	p.committing()
	start := p.lastStart
	began = start.Add(6 * time.Millisecond) // the commit took 6ms
	if d := p.deadline(began); d != start.Add(100*time.Millisecond) {
		t.Fatalf("deadline %s after the previous commit started, want 100ms", d.Sub(start))
	}
	// A transaction stays open at least 3/4 of the interval, however long
	// the last commit took or however long ago it started.
	p.lastStart = time.Now().Add(-time.Second)
	began = time.Now()
	if d := p.deadline(began); d != began.Add(75*time.Millisecond) {
		t.Fatalf("after a quiet spell the deadline is %s after the transaction began, want 3/4 of the interval", d.Sub(began))
	}
	p.lastStart = began.Add(-40 * time.Millisecond) // a 40ms commit just ended
	if d := p.deadline(began); d != began.Add(75*time.Millisecond) {
		t.Fatalf("after a commit of 40%% of the interval the deadline is %s after begin, want 75ms", d.Sub(began))
	}
}
