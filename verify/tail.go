package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tailDenseLimit bounds the decimal keys a Tail stores densely, one byte
// each: a stray huge key costs at most this many bytes, not a crash.
const tailDenseLimit = 1 << 25

// Tail is a read_committed consumer that runs concurrently with a pipeline
// and records every data record's identity (its key, or what [NewTailBy]
// says), so that a test can tell whether a consumer reading along during
// faults was ever handed a record twice.
// [Run] judges the log as it is afterwards; records a live consumer was
// given can later vanish from it (a truncation after a leader change, say),
// taking the evidence of a duplicate with them.
//
// Create one with [NewTail], wait with [Tail.WaitFor] or [Tail.WaitEnd],
// and always call [Tail.Stop].
type Tail struct {
	topic  string
	id     func(*kgo.Record) []byte
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever the state below changes
	seen    *keyTable[uint8]
	pos     map[int32]int64 // next offset per partition, data or control
	rep     TailReport

	stopOnce sync.Once
}

// TailReport is what a [Tail] saw.
type TailReport struct {
	Topic string `json:"topic"`
	// Records counts data records, Keys distinct identities (keys, for
	// [NewTail]) among them.
	Records int64 `json:"records"`
	Keys    int64 `json:"keys"`
	// Duplicates counts records whose identity an earlier record had.
	Duplicates        int64    `json:"duplicates"`
	DuplicateExamples []string `json:"duplicate_examples,omitempty"`
	// Err is why the tail stopped early, if it did; the counts then
	// cover only what was read before. A tail that failed saw nothing
	// after the failure, so its zero Duplicates proves nothing.
	Err error `json:"-"`
}

// OK reports whether the tail ran without error and saw no duplicate.
func (r TailReport) OK() bool { return r.Duplicates == 0 && r.Err == nil }

// MarshalJSON adds "ok" and Err as "error".
func (r TailReport) MarshalJSON() ([]byte, error) {
	type report TailReport
	var e string
	if r.Err != nil {
		e = r.Err.Error()
	}
	return json.Marshal(struct {
		OK    bool   `json:"ok"`
		Error string `json:"error,omitempty"`
		report
	}{r.OK(), e, report(r)})
}

// String summarises the report on one line, with a few duplicates as
// examples.
func (r TailReport) String() string {
	s := fmt.Sprintf("tail %s: %d records, %d keys, %d duplicates", r.Topic, r.Records, r.Keys, r.Duplicates)
	if len(r.DuplicateExamples) > 0 {
		s += " (e.g. " + strings.Join(r.DuplicateExamples, " ") + ")"
	}
	if r.Err != nil {
		s += "; stopped early: " + r.Err.Error()
	}
	return s
}

// NewTail starts tailing topic from its beginning with a read_committed
// consumer built from opts (connection settings only, as for [Run]).
//
// The topic need not exist yet: the consumer refreshes metadata about once
// a second and starts from offset zero of every partition once it appears,
// so records written right after creation are not skipped. Partitions added
// later are picked up the same way.
//
// The tail runs until Stop is called or ctx is done. A fetch error that
// kgo does not retry itself (including data loss, after which a reset
// would re-read records and fake duplicates) stops it and is reported in
// TailReport.Err and by the Wait methods.
func NewTail(ctx context.Context, opts []kgo.Opt, topic string) (*Tail, error) {
	return NewTailBy(ctx, opts, topic, func(r *kgo.Record) []byte { return r.Key })
}

// NewTailBy is [NewTail] for a topic whose records are identified by id
// rather than by key: the aggregate topology's results, say, whose key is a
// group that many windows share (internal/aggcheck.WindowID). A record whose id an
// earlier record had is a duplicate.
func NewTailBy(ctx context.Context, opts []kgo.Opt, topic string, id func(*kgo.Record) []byte) (*Tail, error) {
	if topic == "" {
		return nil, errors.New("verify: tail needs a topic")
	}
	cl, err := kgo.NewClient(append(slices.Clip(opts),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)...)
	if err != nil {
		return nil, fmt.Errorf("verify: creating tail consumer for %s: %w", topic, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &Tail{
		topic:   topic,
		id:      id,
		cl:      cl,
		cancel:  cancel,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		seen:    newKeyTable[uint8](tailDenseLimit),
		pos:     make(map[int32]int64),
		rep:     TailReport{Topic: topic},
	}
	go t.run(ctx)
	return t, nil
}

func (t *Tail) run(ctx context.Context) {
	defer close(t.done)
	for {
		fs := t.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		var fatal error
		fs.EachError(func(topic string, p int32, err error) {
			// A topic that does not exist yet is expected; anything
			// else kgo hands us it has given up retrying.
			if fatal == nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
				fatal = fmt.Errorf("verify: tailing %s[%d]: %w", topic, p, err)
			}
		})
		t.mu.Lock()
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				t.pos[r.Partition] = r.Offset + 1
				if r.Attrs.IsControl() {
					continue
				}
				t.rep.Records++
				id := t.id(r)
				n := t.seen.slot(id)
				if *n < ^uint8(0) {
					*n++
				}
				if *n == 1 {
					t.rep.Keys++
				} else {
					t.rep.Duplicates++
					addExample(&t.rep.DuplicateExamples, render(id))
				}
			}
		})
		t.rep.Err = fatal
		close(t.changed)
		t.changed = make(chan struct{})
		t.mu.Unlock()
		if fatal != nil {
			return
		}
	}
}

// Report returns what the tail has seen so far, without stopping it.
func (t *Tail) Report() TailReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rep
	r.DuplicateExamples = slices.Clone(r.DuplicateExamples)
	return r
}

// Stop stops the tail, closes its client and returns what it saw. It may be
// called more than once; later calls return the same report.
func (t *Tail) Stop() TailReport {
	t.stopOnce.Do(func() {
		t.cancel()
		<-t.done
		t.cl.Close()
	})
	return t.Report()
}

// WaitFor waits until the tail has seen at least n distinct identities. It
// returns an error if ctx is done first, saying how far it got, or if the
// tail stopped.
func (t *Tail) WaitFor(ctx context.Context, n int64) error {
	return t.wait(ctx, func() (bool, string) {
		return t.rep.Keys >= n, fmt.Sprintf("saw %d of %d keys", t.rep.Keys, n)
	})
}

// WaitEnd waits until the tail has read every partition of its topic up to
// the last stable offset listed when WaitEnd is called, so that everything
// committed before the call has been seen. If the topic does not exist yet,
// WaitEnd keeps asking until it does or ctx is done.
//
// As with [Run], if transactions were open at the listing, the partition
// may complete only once something past the listed offset becomes visible.
func (t *Tail) WaitEnd(ctx context.Context) error {
	adm := kadm.NewClient(t.cl)
	var ranges []PartitionRange
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		snap, err := snapshot(ctx, adm, t.topic)
		if err == nil {
			ranges = snap[t.topic]
			break
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || ctx.Err() != nil {
			return fmt.Errorf("verify: tail of %s: %w", t.topic, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("verify: tail of %s: %w (%w)", t.topic, ctx.Err(), err)
		case <-time.After(backoff):
		}
	}
	return t.wait(ctx, func() (bool, string) {
		var short []string
		for _, r := range ranges {
			if p := max(t.pos[r.Partition], r.Start); p < r.End {
				short = append(short, fmt.Sprintf("%s[%d] at offset %d of %d", t.topic, r.Partition, p, r.End))
			}
		}
		return len(short) == 0, "short of the last stable offset: " + strings.Join(short, ", ")
	})
}

// wait calls cond under t.mu whenever the tail's state changes until it
// reports done, ctx is done or the tail stops.
func (t *Tail) wait(ctx context.Context, cond func() (done bool, progress string)) error {
	for {
		t.mu.Lock()
		ok, progress := cond()
		err, changed := t.rep.Err, t.changed
		t.mu.Unlock()
		switch {
		case ok:
			return nil
		case err != nil:
			return fmt.Errorf("verify: tail of %s failed, %s: %w", t.topic, progress, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("verify: tail of %s %s: %w", t.topic, progress, ctx.Err())
		case <-t.done:
			t.mu.Lock()
			ok, progress = cond()
			err = t.rep.Err
			t.mu.Unlock()
			switch {
			case ok:
				return nil
			case err != nil:
				return fmt.Errorf("verify: tail of %s failed, %s: %w", t.topic, progress, err)
			}
			return fmt.Errorf("verify: tail of %s stopped, %s", t.topic, progress)
		case <-changed:
		}
	}
}
