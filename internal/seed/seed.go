// Package seed is where the fault drills (the e2e tests and the chaos
// scenarios, in tests and in `eosctl chaos`) draw their random instants
// and victims from: a source seeded from EOS_TEST_SEED when it is set and
// at random otherwise, with the seed said, so that a failing run can be
// replayed with the same kill timings.
package seed

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

// Env names the variable that replays a seed.
const Env = "EOS_TEST_SEED"

// Draw returns the seed in EOS_TEST_SEED, or a fresh random one when it is
// unset.
func Draw() (uint64, error) {
	if s := os.Getenv(Env); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%q is not a seed (an unsigned integer): %w", Env, s, err)
		}
		return n, nil
	}
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]) >> 1, nil // positive either way, easier to paste
}

// New is the random source of seed s.
func New(s uint64) *rand.Rand { return rand.New(rand.NewPCG(s, s)) }

// Replay is the line that says s: "seed N (replay with EOS_TEST_SEED=N)".
func Replay(s uint64) string { return fmt.Sprintf("seed %d (replay with %s=%d)", s, Env, s) }

// TB is the part of testing.TB that Rand uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Rand is a test's random source for its fault timings, its seed logged.
// It is not safe for concurrent use: draw from one goroutine.
func Rand(t TB) *rand.Rand {
	t.Helper()
	s, err := Draw()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Logf("%s", Replay(s))
	return New(s)
}
