package topologies

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/pipeline"
)

// Sessioniser keeps activity sessions per key, as a building block for a
// pipeline.Transform: a session is a run of one key's records in which
// consecutive event times are at most the gap apart, so a gap of inactivity
// longer than the gap ends it. The aggregate topology's session windows
// (window: {session_gap: ...}) are a Sessioniser behind a YAML
// configuration; a custom Transform uses one directly (see
// ExampleSessioniser).
//
// Each session holds an accumulator, opaque to the Sessioniser: Add folds a
// record's accumulator into the session its event time falls in, with the
// merge function given to NewSessioniser. A record that falls within the
// gap of two sessions bridges them: they merge into one, and the sessions
// that no longer exist are reported (SessionRetract) so that a reader of
// updates holds the current sessions only. A session is identified by its
// key and start, the event time of its first record; its end is the event
// time of its last.
//
// Event time and closing, as the tumbling and hopping windows do it. Each
// state partition has a stream time, the largest event time Add was given
// for it. A session closes when stream time passes its end + gap + grace
// (a record at end + gap would still join it, and may be grace late); it
// is reported once (SessionFinal) and forgotten. A record is late, and Add
// returns a *pipeline.DeadLetterError with reason "late-record", when its
// own session would already have closed (stream time past its event time
// + gap + grace), or when it falls within the gap after a session of its
// key that has closed: it belongs to a result already given. So a record
// at most grace behind stream time is never late, and with every record
// within the grace the final sessions are those of the input sorted by
// time, whatever the order it came in.
//
// State. The open sessions, the end of each key's last closed session
// (kept for gap + grace after it closed, to recognise records that belong
// to it) and stream time live in a keyed store of the Transform, which
// declares it (Sessioniser.Store) in its pipeline.Declaration: they are
// changelogged in the transaction of the output and restored on every
// assignment, so a crash neither loses a session nor folds a record twice.
// The Sessioniser keeps nothing else, so it needs no Flusher.
//
// What can go wrong. State is per partition: the records of one key must
// reach one partition (key the input by it, or repartition by it, as the
// aggregate topology does). Stream time moves only with records, so the
// last sessions of a finite input close when a later record arrives.
// Closing scans the partition's store when the earliest close it recorded
// comes due; a key whose session keeps being extended just before it
// closes makes that scan find nothing to close.
type Sessioniser struct {
	store string
	gap   int64 // ms
	grace int64 // ms
	merge func(acc, add []byte) []byte
}

// SessionKind says what a SessionEvent reports.
type SessionKind int

const (
	// SessionUpdate is a session as it is after a record changed it.
	SessionUpdate SessionKind = iota
	// SessionRetract is a session that no longer exists: merged into the
	// session of the update that follows it, or its start moved earlier.
	SessionRetract
	// SessionFinal is a session that closed, with its final accumulator.
	SessionFinal
)

func (k SessionKind) String() string {
	return [...]string{"update", "retract", "final"}[k]
}

// SessionEvent is a change of one session.
type SessionEvent struct {
	Kind SessionKind
	Key  string
	// Start and End are the event times of the session's first and last
	// records.
	Start, End time.Time
	// Acc is the session's accumulator. It belongs to the store: do not
	// modify it.
	Acc []byte
}

// NewSessioniser returns a Sessioniser keeping its sessions in the store
// named store, for records at most gap apart and late by at most grace.
// merge returns a new accumulator with add folded into acc (acc nil: a copy
// of add); it must not modify either, since the store holds them. Errors are
// *eos.ConfigError.
func NewSessioniser(store string, gap, grace time.Duration, merge func(acc, add []byte) []byte) (*Sessioniser, error) {
	switch {
	case store == "":
		return nil, eos.BadConfig("topologies.Sessioniser.store", "a store name is required")
	case gap <= 0 || gap%time.Millisecond != 0:
		return nil, eos.BadConfig("topologies.Sessioniser.gap", "want a positive whole number of milliseconds, got %s", gap)
	case grace < 0 || grace%time.Millisecond != 0:
		return nil, eos.BadConfig("topologies.Sessioniser.grace", "want zero or a positive whole number of milliseconds, got %s", grace)
	case merge == nil:
		return nil, eos.BadConfig("topologies.Sessioniser.merge", "a merge function is required")
	}
	return &Sessioniser{store: store, gap: gap.Milliseconds(), grace: grace.Milliseconds(), merge: merge}, nil
}

// Store returns the name of the store the Transform must declare.
func (s *Sessioniser) Store() string { return s.store }

// String describes the Sessioniser.
func (s *Sessioniser) String() string {
	return fmt.Sprintf("sessioniser (store %s, gap %s, grace %s)", s.store, ms(s.gap), ms(s.grace))
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// Add folds acc, a record of key at event time at, into its session in the
// state partition of in, and calls emit for every session that changed, in
// order: the retracted ones, the updated one, then those that closed (by
// end, then key). A late record changes nothing and returns a
// *pipeline.DeadLetterError.
func (s *Sessioniser) Add(in *pipeline.Record, key string, at time.Time, acc []byte, emit func(SessionEvent)) error {
	return s.add(in.Store(s.store), key, at.UnixMilli(), acc, emit)
}

// Store keys: the partition's stream time and earliest close under keys
// that begin with a zero byte, each key's sessions under "k" + key.
const (
	sessStreamTimeKey = "\x00st"
	sessNextCloseKey  = "\x00nc"
	sessKeyPrefix     = "k"
)

// session is one open session.
type session struct {
	start, end int64
	acc        []byte
}

// keySessions is one key's state: the end of its last closed session (still
// remembered; math.MinInt64 if none) and its open sessions by start.
type keySessions struct {
	closedEnd int64
	open      []session
}

// The value of a key's state: version byte 1, closedEnd (8 bytes), then per
// open session its start and end (8 bytes each), the accumulator's length
// (uvarint) and the accumulator.
const sessionsVersion = 1

func encodeSessions(k keySessions) []byte {
	n := 9
	for _, x := range k.open {
		n += 16 + binary.MaxVarintLen32 + len(x.acc)
	}
	b := make([]byte, 0, n)
	b = append(b, sessionsVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(k.closedEnd))
	for _, x := range k.open {
		b = binary.BigEndian.AppendUint64(b, uint64(x.start))
		b = binary.BigEndian.AppendUint64(b, uint64(x.end))
		b = binary.AppendUvarint(b, uint64(len(x.acc)))
		b = append(b, x.acc...)
	}
	return b
}

// decodeSessions decodes a key's state into k (reusing k.open); the
// accumulators alias b.
func decodeSessions(b []byte, k *keySessions) error {
	k.closedEnd, k.open = math.MinInt64, k.open[:0]
	if b == nil {
		return nil
	}
	if len(b) < 9 || b[0] != sessionsVersion {
		return fmt.Errorf("a session state of %d bytes in an unknown format", len(b))
	}
	k.closedEnd = int64(binary.BigEndian.Uint64(b[1:]))
	for b = b[9:]; len(b) > 0; {
		if len(b) < 17 {
			return fmt.Errorf("a session state is truncated")
		}
		x := session{start: int64(binary.BigEndian.Uint64(b)), end: int64(binary.BigEndian.Uint64(b[8:]))}
		l, n := binary.Uvarint(b[16:])
		if n <= 0 || uint64(len(b)-16-n) < l {
			return fmt.Errorf("a session state is truncated")
		}
		x.acc = b[16+n : 16+n+int(l)]
		b = b[16+n+int(l):]
		k.open = append(k.open, x)
	}
	return nil
}

func (s *Sessioniser) add(st kv, key string, ts int64, acc []byte, emit func(SessionEvent)) error {
	streamTime := getInt(st, sessStreamTimeKey, math.MinInt64)
	if streamTime != math.MinInt64 && ts+s.gap+s.grace < streamTime {
		return pipeline.DeadLetter("late-record", fmt.Errorf("its session closed before it arrived: a session ending at its event time %s closes when the partition's stream time passes %s (gap %s, grace %s), and stream time is %s",
			rfc3339(ts), rfc3339(ts+s.gap+s.grace), ms(s.gap), ms(s.grace), rfc3339(streamTime)))
	}
	skey := sessKeyPrefix + key
	prev, _ := st.Get(skey)
	var k keySessions
	if err := decodeSessions(prev, &k); err != nil {
		return pipeline.DeadLetter("state-format", fmt.Errorf("store %s, key %q: %w: a changed configuration needs a new app (pipeline.Config.App)", s.store, key, err))
	}
	if k.closedEnd != math.MinInt64 && ts <= k.closedEnd+s.gap {
		return pipeline.DeadLetter("late-record", fmt.Errorf("it belongs to a session of its key that closed before it arrived: that session ended at %s and closed when the partition's stream time passed %s (gap %s, grace %s); stream time is %s",
			rfc3339(k.closedEnd), rfc3339(k.closedEnd+s.gap+s.grace), ms(s.gap), ms(s.grace), rfc3339(streamTime)))
	}
	// The open sessions within the gap of ts are consecutive: sessions are
	// disjoint and more than the gap apart.
	i := 0
	for i < len(k.open) && k.open[i].end+s.gap < ts {
		i++
	}
	j := i
	for j < len(k.open) && k.open[j].start-s.gap <= ts {
		j++
	}
	merged := session{start: ts, end: ts}
	var macc []byte // the merged sessions' accumulator: the store's own while it is one
	for _, x := range k.open[i:j] {
		merged.start, merged.end = min(merged.start, x.start), max(merged.end, x.end)
		if macc == nil {
			macc = x.acc
		} else {
			macc = s.merge(macc, x.acc)
		}
	}
	merged.acc = s.merge(macc, acc)
	for _, x := range k.open[i:j] {
		if x.start != merged.start {
			emit(SessionEvent{Kind: SessionRetract, Key: key, Start: time.UnixMilli(x.start), End: time.UnixMilli(x.end), Acc: x.acc})
		}
	}
	emit(SessionEvent{Kind: SessionUpdate, Key: key, Start: time.UnixMilli(merged.start), End: time.UnixMilli(merged.end), Acc: merged.acc})
	k.open = slices.Replace(k.open, i, j, merged)
	st.Put(skey, encodeSessions(k))
	if c := merged.end + s.gap + s.grace + 1; c < getInt(st, sessNextCloseKey, math.MaxInt64) {
		putInt(st, sessNextCloseKey, c)
	}
	if ts > streamTime {
		streamTime = ts
		putInt(st, sessStreamTimeKey, streamTime)
		if streamTime >= getInt(st, sessNextCloseKey, math.MaxInt64) {
			s.close(st, streamTime, emit)
		}
	}
	return nil
}

// close reports and forgets every session that closed by streamTime, in
// order of end then key, forgets the closed ends no record can reach any
// more, and records the next close.
func (s *Sessioniser) close(st kv, streamTime int64, emit func(SessionEvent)) {
	var done []SessionEvent
	next := int64(math.MaxInt64)
	var k keySessions
	st.Range(func(skey string, v []byte) bool {
		if !strings.HasPrefix(skey, sessKeyPrefix) {
			return true
		}
		if decodeSessions(v, &k) != nil {
			return true // add dead-letters its records
		}
		changed := false
		open := k.open[:0]
		for _, x := range k.open {
			if x.end+s.gap+s.grace < streamTime {
				done = append(done, SessionEvent{Kind: SessionFinal, Key: skey[len(sessKeyPrefix):], Start: time.UnixMilli(x.start), End: time.UnixMilli(x.end), Acc: x.acc})
				k.closedEnd = max(k.closedEnd, x.end)
				changed = true
				continue
			}
			open = append(open, x)
			next = min(next, x.end+s.gap+s.grace+1)
		}
		k.open = open
		// A closed end matters while a record not late by stream time
		// could fall within its gap.
		if k.closedEnd != math.MinInt64 {
			if forget := k.closedEnd + 2*s.gap + s.grace + 1; forget <= streamTime {
				k.closedEnd, changed = math.MinInt64, true
			} else {
				next = min(next, forget)
			}
		}
		switch {
		case !changed:
		case len(k.open) == 0 && k.closedEnd == math.MinInt64:
			st.Delete(skey)
		default:
			st.Put(skey, encodeSessions(k))
		}
		return true
	})
	slices.SortFunc(done, func(a, b SessionEvent) int {
		if c := a.End.Compare(b.End); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	for _, e := range done {
		emit(e)
	}
	if next == math.MaxInt64 {
		st.Delete(sessNextCloseKey)
	} else {
		putInt(st, sessNextCloseKey, next)
	}
}
