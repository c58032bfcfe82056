// Package pollsize chooses how many records a consume loop takes in one
// poll: the worker's (pipeline), and, so that the comparisons are like for
// like, the hand-written loops eosctl bench runs beside it.
package pollsize

import "time"

// Bounds of how many records a loop takes in one poll.
//
// Why a poll may be large: kgo sends a broker its next fetch only once
// every record of the fetch it buffered from that broker has been polled.
// A fetch of pipeline.FetchBounds' 8 MiB holds about 60,000 records of 100 bytes,
// so polls of 10,000 records (what the worker took until 2026-12-06) left
// it waiting a whole fetch round trip every six polls, processing nothing:
// on the embedded broker that cost passthrough 5-13% of its throughput and
// a de-duplication 25% (BENCHMARKS.md). A poll that takes the whole
// buffered fetch lets the next one travel while this one is processed.
//
// Why it is bounded: a loop checks whether its transaction (or commit)
// is due only between polls, so a poll that takes long to process delays the
// commit. A Sizer keeps a poll's processing within half a commit
// interval, from the processing time per record it measured, between
// Min (a slow topology still takes as much as it always did)
// and Max.
const (
	Min = 10_000
	Max = 100_000
)

// Sizer chooses how many records the next poll may take. The zero value
// is ready: it allows Min until it has measured a poll.
type Sizer struct {
	perRecord time.Duration // moving average of processing time a record; 0: none measured yet
}

// Limit returns the next poll's bound for a commit interval of iv.
func (s *Sizer) Limit(iv time.Duration) int {
	if s.perRecord <= 0 {
		return Min
	}
	return int(min(max(int64(iv/2/s.perRecord), Min), Max))
}

// Observe folds in a poll of n records processed in d. Polls of fewer
// than a thousand records say more about fixed costs than about the
// records, and are left out.
func (s *Sizer) Observe(n int, d time.Duration) {
	if n < 1000 {
		return
	}
	per := d / time.Duration(n)
	if s.perRecord <= 0 {
		s.perRecord = max(per, 1)
		return
	}
	s.perRecord = max((3*s.perRecord+per)/4, 1)
}
