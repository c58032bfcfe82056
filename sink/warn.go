package sink

import (
	"fmt"
	"time"
)

// warnEvery is how often, at most, the sink warns about the records it
// could not write; the first dead letter is warned about at once.
const warnEvery = 10 * time.Second

// deadWarn gathers the dead letters since the last warning: a record the
// sink cannot write is never silent, in the log as on the metrics, and a
// flood of them costs one log line per warnEvery.
type deadWarn struct {
	last     time.Time
	byReason map[string]int
	n        int
	first    item // the first dead letter since the last warning
}

// warnDead counts the committed batch's dead letters and warns if it is time.
func (s *Sink) warnDead(dead []item) {
	w := &s.warn
	for _, d := range dead {
		if w.n == 0 {
			w.first = d
		}
		if w.byReason == nil {
			w.byReason = map[string]int{}
		}
		w.byReason[d.dead.Reason]++
		w.n++
	}
	if w.n > 0 && time.Since(w.last) >= warnEvery {
		s.flushWarn()
	}
}

// flushWarn logs the dead letters gathered since the last warning, if any.
func (s *Sink) flushWarn() {
	w := &s.warn
	if w.n == 0 {
		return
	}
	r := w.first.rec
	s.cfg.Logger.Warn(fmt.Sprintf("%d records could not be written to table %s and went to the dead-letter topic %s (warned at most every %s)", w.n, s.cfg.Mapping.Table, s.cfg.DLQ, warnEvery),
		"dead_letters", w.n, "by_reason", w.byReason, "first_reason", w.first.dead.Reason, "first_error", w.first.dead.Err.Error(),
		"first_record", fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset))
	*w = deadWarn{last: time.Now()}
}
