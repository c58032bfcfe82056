package pipeline

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// EventKind names a worker lifecycle event.
type EventKind string

const (
	EventStarted   EventKind = "started"   // producer initialised
	EventCommitted EventKind = "committed" // a transaction committed
	EventAborted   EventKind = "aborted"   // a transaction aborted with a known outcome
	EventReinit    EventKind = "reinit"    // the producer was re-initialised after an unknown outcome
	EventFenced    EventKind = "fenced"    // another incarnation took over; the worker stops
	EventStopped   EventKind = "stopped"   // the worker stopped (Err set if it failed)
	EventAssigned  EventKind = "assigned"  // the group assigned partitions (Partitions set)
	EventRevoked   EventKind = "revoked"   // partitions were revoked in a rebalance, or lost
	EventRestoring EventKind = "restoring" // restoring state of newly assigned partitions: when it begins and every second while it runs (Partitions: changelogs; Records: still to read)
	EventRestored  EventKind = "restored"  // state restored (Records read, Duration); processing of the partitions starts
)

// Event is one worker lifecycle event, as passed to Config.OnEvent and as
// written, one JSON object per line, by JSONEvents.
type Event struct {
	Time            time.Time     `json:"time"`
	Kind            EventKind     `json:"event"`
	App             string        `json:"app"`
	Instance        string        `json:"instance"`
	TransactionalID string        `json:"transactional_id"`
	ProducerID      int64         `json:"producer_id"`
	Epoch           int16         `json:"epoch"`
	Records         int           `json:"records,omitempty"`  // produced in the transaction
	Consumed        int           `json:"consumed,omitempty"` // consumed in the transaction
	Duration        time.Duration `json:"duration_ns,omitempty"`
	CommitDuration  time.Duration `json:"commit_duration_ns,omitempty"`
	// FlushDuration is the part of CommitDuration that waited for the
	// transaction's records in flight; the rest is the offset commit and
	// EndTxn (txn.Result.FlushDuration).
	FlushDuration time.Duration `json:"flush_duration_ns,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	// DeadLetters counts the dead letters a committed transaction wrote.
	DeadLetters int `json:"dead_letters,omitempty"`
	// Partitions are the partitions assigned or revoked, by topic.
	Partitions map[string][]int32 `json:"partitions,omitempty"`
	Err        string             `json:"error,omitempty"`
}

// JSONEvents returns an OnEvent function that writes each event to w as one
// line of JSON. Writes are serialised; errors are ignored, since losing the
// event stream must not stop the worker.
func JSONEvents(w io.Writer) func(Event) {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
}

// Chain returns an OnEvent function calling each non-nil fn in order.
func Chain(fns ...func(Event)) func(Event) {
	return func(e Event) {
		for _, fn := range fns {
			if fn != nil {
				fn(e)
			}
		}
	}
}
