package pollsize

import (
	"testing"
	"time"
)

// A poll is sized to half a commit interval of processing at the rate
// measured, within [Min, Max]; until a poll of a thousand records or more
// is measured, Min.
func TestLimitKeepsAPollWithinHalfAnInterval(t *testing.T) {
	var s Sizer
	if got := s.Limit(100 * time.Millisecond); got != Min {
		t.Fatalf("unmeasured: %d, want Min", got)
	}
	s.Observe(999, time.Second) // too small a poll to say anything
	if got := s.Limit(100 * time.Millisecond); got != Min {
		t.Fatalf("after a small poll: %d, want Min", got)
	}
	for _, c := range []struct {
		per  time.Duration // processing time a record
		iv   time.Duration
		want int
	}{
		{300 * time.Nanosecond, 100 * time.Millisecond, Max},   // 166,666 fit: capped
		{time.Microsecond, 100 * time.Millisecond, 50_000},     // a join
		{time.Microsecond, 10 * time.Millisecond, Min},         // 5,000 fit: floored
		{20 * time.Microsecond, 100 * time.Millisecond, Min},   // wordcount
		{500 * time.Nanosecond, 1 * time.Second, Max},          // a long interval
		{2 * time.Microsecond, 100 * time.Millisecond, 25_000}, // a heavy etl
	} {
		s := Sizer{}
		for range 20 { // the average settles on a steady rate
			s.Observe(10_000, 10_000*c.per)
		}
		if got := s.Limit(c.iv); got != c.want {
			t.Errorf("%s a record, interval %s: limit %d, want %d", c.per, c.iv, got, c.want)
		}
	}
}

// The average follows a change of rate within a few polls, and one odd
// poll moves it by a quarter of the difference only.
func TestObserveAveragesOverPolls(t *testing.T) {
	var s Sizer
	s.Observe(10_000, 10*time.Millisecond) // 1 µs
	s.Observe(10_000, 50*time.Millisecond) // one slow poll: 5 µs
	if s.perRecord != 2*time.Microsecond {
		t.Fatalf("after 1 µs then 5 µs: %s a record, want 2µs", s.perRecord)
	}
	for range 10 {
		s.Observe(10_000, 10*time.Millisecond)
	}
	if s.perRecord > 1100*time.Nanosecond {
		t.Fatalf("ten polls at 1 µs later: %s a record", s.perRecord)
	}
}
