package aggcheck

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// SessionConfig is [Config] with session windows: the same input, the same
// aggregations, grouped into sessions of each user's records at most one
// second apart. The grace period (10 minutes) again outlasts any input of
// up to [MaxRecords], so no regular record is late and no session closes
// before [Input.Heartbeats].
const SessionConfig = `topology: aggregate
group_by: user
time: ts
window:
  session_gap: 1s
  grace: 10m
` + aggregations

// SessionGap is session_gap of [SessionConfig], in ms.
const SessionGap = 1000

// Event is one record of a group at an event time (Unix ms) with an amount,
// as a reference sessioniser takes it.
type Event struct {
	Group  string
	TS     int64
	Amount float64
}

// Sessionise is the reference sessioniser: it sorts each group's events by
// time and cuts a session wherever two consecutive ones are more than gap
// apart. It knows nothing of arrival order, stream time or merging: with
// every record within the grace period, the topology's final sessions must
// be these. Each session is a [Window] from its first record's time to its
// last's, final, by [Window.ID].
func Sessionise(evs []Event, gap int64) map[string]Window {
	byGroup := map[string][]Event{}
	for _, e := range evs {
		byGroup[e.Group] = append(byGroup[e.Group], e)
	}
	out := map[string]Window{}
	for g, es := range byGroup {
		slices.SortStableFunc(es, func(a, b Event) int { return cmp.Compare(a.TS, b.TS) })
		var w Window
		for i, e := range es {
			if i == 0 || e.TS-es[i-1].TS > gap {
				if i > 0 {
					out[w.ID()] = w
				}
				w = Window{Key: g, Start: e.TS, Smallest: math.Inf(1), Biggest: math.Inf(-1), Final: true}
			}
			w.End = e.TS
			w.add(e.Amount)
		}
		out[w.ID()] = w
	}
	return out
}

// NewSessionInput is [NewInput] for [SessionConfig], with every 50th
// regular record held back and written 3,000 records (3s of event time)
// later: within the grace period, it reaches its group after records on
// both sides of it, and either extends a session backwards or bridges two
// into one, so the drill exercises merging.
func NewSessionInput(topic string, n int, seed uint64) *Input {
	in := NewInput(topic, n, seed)
	var out, held []*kgo.Record
	var due []int
	regular := 0
	for _, r := range in.Records {
		for len(held) > 0 && due[0] <= regular {
			out, held, due = append(out, held[0]), held[1:], due[1:]
		}
		if isRegular(r) {
			regular++
			if regular%50 == 25 {
				held, due = append(held, r), append(due, regular+3000)
				continue
			}
		}
		out = append(out, r)
	}
	in.Records = append(out, held...)
	return in
}

// isRegular tells NewInput's regular records from its late records and
// poison pills by their keys.
func isRegular(r *kgo.Record) bool { return len(r.Key) > 0 && r.Key[0] == 'n' }

// NewSessionReference is [NewReference] for [SessionConfig]: the same dead
// letters, and the regular records' sessions by [Sessionise].
func NewSessionReference(input string, recs []*kgo.Record) *Reference {
	return newReference(input, recs, func(evs []Event) map[string]Window { return Sessionise(evs, SessionGap) })
}

// JudgeSessions is [Judge] for [SessionConfig]: every session's final
// result once and exact, every dead letter once.
func JudgeSessions(ctx context.Context, opts []kgo.Opt, t Topics) (*Report, error) {
	return judge(ctx, opts, t, NewSessionReference)
}

// tumbling folds events into the tumbling windows of [Config].
func tumbling(evs []Event) map[string]Window {
	out := map[string]Window{}
	for _, e := range evs {
		start := e.TS - e.TS%aggregateWindow
		w := Window{Key: e.Group, Start: start, End: start + aggregateWindow, Smallest: math.Inf(1), Biggest: math.Inf(-1), Final: true}
		if prev, ok := out[w.ID()]; ok {
			w = prev
		}
		w.add(e.Amount)
		out[w.ID()] = w
	}
	return out
}

// add folds a record's amount into the window.
func (w *Window) add(amount float64) {
	w.Orders++
	w.Total += amount
	w.Smallest, w.Biggest = min(w.Smallest, amount), max(w.Biggest, amount)
	w.Mean = w.Total / float64(w.Orders)
}
