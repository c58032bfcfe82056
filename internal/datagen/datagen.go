// Package datagen writes the deterministic test records that the exactly-once
// pipelines consume and that package verify judges.
//
// Record i has key strconv.FormatInt(i, 10), a JSON value
// built by [Value], and the event time that is also in the value as its
// timestamp. Everything except the timestamp is a pure function of i ([User],
// [Amount]), so downstream reference computations can recompute what a
// pipeline should have produced without reading the input back. The first
// Produce into a topic writes keys 0 through Count-1; a later one continues
// after the highest key the topic holds (see [NextKey]), so that every key
// of a topic is written once however often Produce runs.
package datagen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config says what [Produce] writes.
type Config struct {
	// Topic is the topic to write to. It is created if missing.
	Topic string
	// Count is the number of records to write: keys 0 through Count-1
	// into a new or empty topic, the next Count keys after the highest
	// one already there otherwise (see [NextKey]).
	Count int64
	// Again writes keys 0 through Count-1 even into a topic that already
	// holds records: a producer re-sending what it sent before, the input
	// the dedup topology is for. A copy of such an input is not a copy of
	// distinct keys, and verify says so.
	Again bool
	// Values, if set, are the record values to write instead of [Value]'s
	// JSON, in order (one per line of a text file, say); Count must then
	// be len(Values) and Size is not used. Keys are the same sequence
	// numbers, so verify judges a copy of them as of any other input.
	Values [][]byte
	// Keys, if positive, is how many distinct keys the records cycle
	// through: record i is keyed i mod Keys (its value still carries seq
	// i), a stream of events about Keys entities, as a join's input is
	// about the rows of its table. Such an input is no copy of distinct
	// keys, and verify says so; its judge reads the seq. The seqs start
	// at 0 whatever the topic holds, as with Again. Zero: every record
	// its own key.
	Keys int64
	// KeyHeader, if set, names a header every record carries its key in
	// as well: an event id, as the dedup topology keyed by a header reads
	// it (key: {header: NAME}), without parsing the value.
	KeyHeader string
	// Size is the exact size in bytes of every record value, see [Value].
	// If it is smaller than a record's minimal encoding the value is not
	// padded; 0 therefore means minimal values.
	Size int
	// Partitions is the partition count used if the topic has to be
	// created. An existing topic is used as it is.
	Partitions int32
	// Compact creates the topic with cleanup.policy=compact, as a join's
	// table wants (its latest row of every key is kept for good). An
	// existing topic is used as it is.
	Compact bool
	// Rate limits production to this many records per second; 0 means
	// as fast as the client will go.
	Rate int
	// Encode, if set, turns each JSON value into what is written (Avro in
	// the Confluent wire format, say); an error stops Produce.
	Encode func(json []byte) ([]byte, error)
	// Progress, if non-nil, is called with the number of acknowledged
	// records about ten times a second and once more when Produce
	// returns. Calls never overlap, and it must not block for long.
	Progress func(done, total int64)
}

// Result is what [Produce] did.
type Result struct {
	// Records is the number of records acknowledged by the broker.
	Records int64 `json:"records"`
	// Bytes is the total size of the acknowledged values (not keys).
	Bytes int64 `json:"bytes"`
	// Elapsed is the wall time from the first record to the last ack.
	Elapsed time.Duration `json:"elapsed"`
	// Partitions is the topic's actual partition count, which differs
	// from Config.Partitions if the topic already existed.
	Partitions int32 `json:"partitions"`
	// Created reports whether Produce created the topic.
	Created bool `json:"created"`
	// FirstKey is the key of the first record written: 0 unless the
	// topic already held datagen records, see [NextKey].
	FirstKey int64 `json:"first_key"`
}

// Validate reports the first problem with c, before anything is written.
func (c Config) Validate() error {
	if err := fencing.ValidateName("topic", c.Topic); err != nil {
		return eos.BadConfig("datagen.Config.Topic", "%w", err)
	}
	switch {
	case c.Values != nil && c.Count != int64(len(c.Values)):
		return eos.BadConfig("datagen.Config.Count", "must be len(Values), %d, got %d", len(c.Values), c.Count)
	case c.Count <= 0:
		return eos.BadConfig("datagen.Config.Count", "must be positive, got %d", c.Count)
	case c.Size < 0:
		return eos.BadConfig("datagen.Config.Size", "must not be negative, got %d", c.Size)
	case c.Partitions <= 0:
		return eos.BadConfig("datagen.Config.Partitions", "must be positive, got %d", c.Partitions)
	case c.Rate < 0:
		return eos.BadConfig("datagen.Config.Rate", "must not be negative, got %d", c.Rate)
	case c.Keys < 0:
		return eos.BadConfig("datagen.Config.Keys", "must not be negative, got %d", c.Keys)
	}
	return nil
}

// Produce writes cfg.Count records to cfg.Topic through cl and waits until
// every one is acknowledged.
//
// cl is owned by the caller, who chooses its durability: kgo's default is an
// idempotent producer with acks=all, which is what the exactly-once tests
// assume, so that broker-side retries cannot duplicate input records. The
// client's partitioner decides placement; kgo's default hashes the key, so
// record i always lands on the same partition of a given topic. A client
// configured with DefaultProduceTopicAlways would silently redirect records
// and must not be used.
//
// If the topic does not exist it is created with cfg.Partitions partitions
// and the broker's default replication factor. If it exists, it is used as
// is, whatever its partition count, and records are appended after anything
// already in it, continuing the key sequence after the highest key it holds
// ([NextKey]): a second Produce adds new keys, which a pipeline copies and
// verify judges like the first ones, never a second copy of a key (unless
// cfg.Again asks for one).
//
// Buffering is bounded by the client's MaxBufferedRecords: Produce blocks
// when that many records are in flight. The first failed record stops
// production; records already buffered are canceled where that is safe, and
// the returned error names the record and partition. Records acknowledged
// before the failure stay written; Result says how many.
func Produce(ctx context.Context, cl *kgo.Client, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	var res Result
	var err error
	var configs map[string]*string
	if cfg.Compact {
		configs = map[string]*string{"cleanup.policy": new("compact")}
	}
	res.Partitions, res.Created, err = admin.EnsureTopic(ctx, cl, cfg.Topic, cfg.Partitions, configs)
	if err != nil {
		return res, err
	}
	if !res.Created && !cfg.Again && cfg.Keys == 0 {
		if res.FirstKey, err = NextKey(ctx, cl, cfg.Topic); err != nil {
			return res, err
		}
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		acked, bytes atomic.Int64
		errOnce      sync.Once
		firstErr     error
	)
	fail := func(err error) {
		errOnce.Do(func() {
			firstErr = err
			cancel() // fail what is still buffered rather than wait for it
		})
	}
	promise := func(r *kgo.Record, err error) {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return // not written: interrupted before it was sent
		}
		if err != nil {
			fail(fmt.Errorf("datagen: producing record %s to %s[%d]: %w", r.Key, r.Topic, r.Partition, err))
			return
		}
		acked.Add(1)
		bytes.Add(int64(len(r.Value)))
	}

	stopProgress := startProgress(cfg.Progress, &acked, cfg.Count)
	start := time.Now()
	pace := newPacer(start, cfg.Rate)
	for i := int64(0); i < cfg.Count && pctx.Err() == nil; i++ {
		if err := pace.wait(pctx, i); err != nil {
			break
		}
		ts, key := time.Now(), res.FirstKey+i
		var value []byte
		if cfg.Values != nil {
			value = cfg.Values[i]
		} else {
			value = Value(key, ts, cfg.Size)
		}
		if cfg.Encode != nil {
			var err error
			if value, err = cfg.Encode(value); err != nil {
				fail(fmt.Errorf("datagen: encoding record %d: %w", key, err))
				break
			}
		}
		k := key
		if cfg.Keys > 0 {
			k %= cfg.Keys
		}
		r := &kgo.Record{
			Topic:     cfg.Topic,
			Key:       strconv.AppendInt(nil, k, 10),
			Value:     value,
			Timestamp: ts,
		}
		if cfg.KeyHeader != "" {
			r.Headers = []kgo.RecordHeader{{Key: cfg.KeyHeader, Value: r.Key}}
		}
		cl.Produce(pctx, r, promise)
	}
	// Flush even when the caller's context is canceled (bounded, not
	// forever): every outstanding promise must have run so that Result
	// counts exactly the records written, and no promise outlives Produce.
	// Records still buffered fail at once with pctx.
	// Not interrupted, the flush takes as long as the brokers need (a
	// leader failing over on Apache Kafka takes a broker session, 9s by
	// default, and more on a busy machine).
	fctx, fcancel := ctx, context.CancelFunc(func() {})
	if ctx.Err() != nil {
		fctx, fcancel = context.WithTimeout(context.WithoutCancel(ctx), flushAfterInterrupt)
	}
	defer fcancel()
	flushErr := cl.Flush(fctx)
	stopProgress()

	res.Records, res.Bytes, res.Elapsed = acked.Load(), bytes.Load(), time.Since(start)
	if cfg.Progress != nil {
		cfg.Progress(res.Records, cfg.Count)
	}
	errOnce.Do(func() {}) // firstErr is final from here on
	switch {
	case firstErr != nil:
		return res, firstErr
	case flushErr != nil:
		return res, fmt.Errorf("datagen: flushing records to %s: %w", cfg.Topic, flushErr)
	case ctx.Err() != nil: // interrupted; what was written is counted
		return res, &InterruptedError{Topic: cfg.Topic, Written: res.Records, Count: cfg.Count, FirstKey: res.FirstKey, Err: ctx.Err()}
	}
	return res, nil
}

// flushAfterInterrupt bounds the flush of an interrupted Produce: the
// records already sent get their answers, the rest fail at once.
const flushAfterInterrupt = 10 * time.Second

// InterruptedError is Produce's error when its context ends first: it says
// what was written, and that a rerun continues after the highest key
// written, so that the user can top the topic up without repeating a key.
type InterruptedError struct {
	Topic          string
	Written, Count int64
	FirstKey       int64 // the key the interrupted Produce started at
	Err            error // the context's error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted after writing %s of %s records to %s (from key %d); producing again continues after the highest key written, repeating none",
		thousands(e.Written), thousands(e.Count), e.Topic, e.FirstKey)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// thousands renders n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// startProgress calls fn about ten times a second from a single goroutine
// until the returned stop function is called; stop waits for the goroutine
// so that calls never overlap the final one Produce makes.
func startProgress(fn func(done, total int64), acked *atomic.Int64, total int64) (stop func()) {
	if fn == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				fn(acked.Load(), total)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// pacer spaces records to a rate by schedule rather than by per-record
// sleeps: record i is due at start + i/rate, and the producer only sleeps
// when it is more than a couple of milliseconds ahead. Short sleeps are
// inaccurate, so this keeps the long-run rate right at high rates while
// letting records go out in small bursts. Falling behind (a slow broker)
// is not made up for with a burst beyond the buffer limit, since Produce
// blocks on MaxBufferedRecords anyway.
type pacer struct {
	start time.Time
	rate  float64
}

func newPacer(start time.Time, rate int) pacer { return pacer{start, float64(rate)} }

func (p pacer) wait(ctx context.Context, i int64) error {
	if p.rate <= 0 {
		return nil
	}
	due := p.start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
	d := time.Until(due)
	if d < 2*time.Millisecond {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
