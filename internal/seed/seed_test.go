package seed

import (
	"strings"
	"testing"
)

// A seed given in EOS_TEST_SEED replays the same draws; the line logged
// says how to replay it; a bad seed is an error naming the variable.
func TestSeedReplaysTheSameDrawsAndSaysHow(t *testing.T) {
	t.Setenv(Env, "42")
	s, err := Draw()
	if err != nil || s != 42 {
		t.Fatalf("Draw() = %d, %v; want 42", s, err)
	}
	a, b := New(s), New(s)
	for range 10 {
		if x, y := a.IntN(1000), b.IntN(1000); x != y {
			t.Fatalf("seed 42 drew %d and %d", x, y)
		}
	}
	if got := Replay(42); got != "seed 42 (replay with EOS_TEST_SEED=42)" {
		t.Fatalf("Replay(42) = %q", got)
	}
	t.Setenv(Env, "x")
	if _, err := Draw(); err == nil || !strings.Contains(err.Error(), Env) {
		t.Fatalf("Draw() with EOS_TEST_SEED=x: %v, want an error naming %s", err, Env)
	}
	t.Setenv(Env, "")
	if _, err := Draw(); err != nil {
		t.Fatal(err)
	}
}
