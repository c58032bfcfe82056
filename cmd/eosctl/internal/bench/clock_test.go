package bench

import (
	"math"
	"slices"
	"testing"
	"time"
)

// samplesOf builds a broker clock's samples: commits of n records every
// step after a start-up of startup, then an idle tail, as a copier whose
// start and last transaction are slow.
func samplesOf(t0 time.Time, startup, step time.Duration, per, backlog int64) []offsetSample {
	s := []offsetSample{{at: t0}}
	at, n := t0.Add(startup), int64(0)
	for n < backlog {
		n = min(n+per, backlog)
		s = append(s, offsetSample{at: at, n: n})
		at = at.Add(step)
	}
	// The last, short-of-work transaction idles until its interval ends.
	s[len(s)-1].at = s[len(s)-1].at.Add(5 * time.Second)
	return s
}

// The rate is the records committed between the commits that passed 10%
// and 90% of the backlog over the time between them: a long start-up and an
// idle tail do not count, so two copiers of the same steady speed measure
// the same whatever their start-up (a JVM's seconds against a Go process's
// milliseconds).
func TestMidRateLeavesStartupAndTailOut(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	// 100,000 records per 100 ms commit: 1,000,000 rec/s when running.
	fast := samplesOf(t0, 50*time.Millisecond, 100*time.Millisecond, 100_000, 2_000_000)
	slow := samplesOf(t0, 8*time.Second, 100*time.Millisecond, 100_000, 2_000_000)
	for name, s := range map[string][]offsetSample{"fast start": fast, "slow start": slow} {
		rps, window, short := midRate(s, 2_000_000)
		// 10% is reached at the 2nd commit (200,000), 90% at the 18th
		// (1,800,000): 1,600,000 records in 1.6 s.
		if short || math.Abs(rps-1_000_000) > 1 || window != 1600*time.Millisecond {
			t.Errorf("%s: %v rec/s over %s (short %v), want 1,000,000 over 1.6s", name, rps, window, short)
		}
	}
	// The whole-run rate the old clock would have given differs by the
	// start-up: the test would not tell them apart otherwise.
	whole := 2_000_000 / slow[len(slow)-1].at.Sub(t0).Seconds()
	if whole > 200_000 {
		t.Fatalf("the slow start's whole-run rate is %v rec/s: the fixture does not model a slow start", whole)
	}
}

// Uneven commits: the marks fall inside commits, and the rate is that of
// the whole commits between the first samples at or past each mark.
func TestMidRateCountsWholeCommitsBetweenTheMarks(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := []offsetSample{{t0, 0}, {t0.Add(time.Second), 50}, {t0.Add(2 * time.Second), 150}, {t0.Add(3 * time.Second), 400},
		{t0.Add(5 * time.Second), 950}, {t0.Add(9 * time.Second), 1000}}
	rps, window, short := midRate(s, 1000)
	// 10% = 100: first at 150 (2s); 90% = 900: first at 950 (5s).
	if short || window != 3*time.Second || math.Abs(rps-800.0/3) > 1e-9 {
		t.Fatalf("got %v rec/s over %s (short %v), want 800/3 over 3s", rps, window, short)
	}
}

// One commit carrying the group past both marks leaves no window between
// them: the rate is from the clock's start to the whole backlog, and it
// says it is short; no samples at all give 0, short.
func TestMidRateWithOneCommitIsShort(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := []offsetSample{{t0, 0}, {t0.Add(2 * time.Second), 1000}}
	if rps, window, short := midRate(s, 1000); !short || window != 2*time.Second || rps != 500 {
		t.Fatalf("got %v rec/s over %s (short %v), want 500 over 2s, short", rps, window, short)
	}
	if rps, _, short := midRate(nil, 1000); !short || rps != 0 {
		t.Fatalf("no samples: got %v rec/s, short %v", rps, short)
	}
}

// The order of the modes rotates by one each round: round 1 as given, and
// over as many rounds as modes every mode runs once in every position, so
// none always runs first (eos did, before).
func TestRoundOrderRotatesEveryModeThroughEveryPosition(t *testing.T) {
	modes := []Mode{ModeBaseline, ModeBare, ModeEOS}
	if got := RoundOrder(modes, 1); !slices.Equal(got, modes) {
		t.Fatalf("round 1: %v, want %v", got, modes)
	}
	if got, want := RoundOrder(modes, 2), []Mode{ModeBare, ModeEOS, ModeBaseline}; !slices.Equal(got, want) {
		t.Fatalf("round 2: %v, want %v", got, want)
	}
	pos := map[Mode]map[int]bool{}
	for round := 1; round <= len(modes); round++ {
		got := RoundOrder(modes, round)
		if len(got) != len(modes) {
			t.Fatalf("round %d: %v is not a permutation of %v", round, got, modes)
		}
		for i, m := range got {
			if pos[m] == nil {
				pos[m] = map[int]bool{}
			}
			pos[m][i] = true
		}
	}
	for _, m := range modes {
		if len(pos[m]) != len(modes) {
			t.Errorf("%s ran in positions %v over %d rounds, want every one", m, pos[m], len(modes))
		}
	}
	if got := RoundOrder(modes, 4); !slices.Equal(got, modes) {
		t.Fatalf("round 4: %v, want round 1's order again", got)
	}
	if !slices.Equal(modes, []Mode{ModeBaseline, ModeBare, ModeEOS}) {
		t.Fatalf("RoundOrder changed its argument: %v", modes)
	}
}
