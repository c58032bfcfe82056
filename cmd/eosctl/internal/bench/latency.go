package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SentHeader is the header of the latency phase's live records: the
// producer's clock, in Unix nanoseconds (8 bytes, big endian), just before
// the record was handed to the client. Topologies that keep headers carry
// it to the output; the record timestamp (milliseconds, as Kafka stores
// it) and the value's "ts" hold the same moment at coarser precision.
const SentHeader = "eos-bench-sent"

// latencyProbe is the latency phase of a run: live records at a fixed rate
// into the run's live input topic, and a consumer of the output that
// measures, for every live record it sees, now minus the time it was sent.
type latencyProbe struct {
	opts     []kgo.Opt
	mode     Mode
	input    string // the live topic
	output   string
	size     int
	rate     int
	duration time.Duration
	firstSeq int64
}

type latencyResult struct {
	samples  []time.Duration
	produced int
}

// run produces the live records, waits until the consumer has seen every
// one of them or timeout passes after the last was produced, and returns the
// latencies seen.
func (p *latencyProbe) run(ctx context.Context, timeout time.Duration, progress func(done int64)) (latencyResult, error) {
	var res latencyResult
	cons, err := p.consumer(ctx)
	if err != nil {
		return res, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(append(append([]kgo.Opt(nil), p.opts...), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return res, fmt.Errorf("latency producer: %w", err)
	}
	defer prod.Close()

	var (
		mu      sync.Mutex
		samples = make([]time.Duration, 0, int(float64(p.rate)*p.duration.Seconds())+16)
		seen    = make(chan struct{}, 1)
	)
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				for _, h := range r.Headers {
					if h.Key == SentHeader && len(h.Value) == 8 {
						samples = append(samples, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(h.Value)))))
					}
				}
			})
			mu.Unlock()
			select {
			case seen <- struct{}{}:
			default:
			}
		}
	}()
	defer func() { stopConsumer(); <-consumerDone }()

	produced, err := p.produce(ctx, prod, progress)
	res.produced = produced
	if err != nil {
		return res, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		mu.Lock()
		got := len(samples)
		mu.Unlock()
		if got >= produced {
			break
		}
		select {
		case <-seen:
		case <-deadline.C:
			return res, fmt.Errorf("latency phase: the output consumer saw %d of %d live records within %s of the last one", got, produced, timeout)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	stopConsumer()
	<-consumerDone
	res.samples = samples
	return res, nil
}

// consumer starts reading the output where it ends now: at the last stable
// offset for eos and bare (read_committed), at the high watermark for the
// baseline.
func (p *latencyProbe) consumer(ctx context.Context) (*kgo.Client, error) {
	adm, err := kgo.NewClient(p.opts...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	var ends kadm.ListedOffsets
	iso := kgo.ReadUncommitted()
	// Both exactly-once modes are read as their users read them; bare
	// was read_uncommitted until issue 14's runs, which say so.
	if p.mode != ModeBaseline {
		iso = kgo.ReadCommitted()
		ends, err = kadm.NewClient(adm).ListCommittedOffsets(ctx, p.output)
	} else {
		ends, err = kadm.NewClient(adm).ListEndOffsets(ctx, p.output)
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("latency consumer: listing the end of %s: %w", p.output, err)
	}
	start := map[string]map[int32]kgo.Offset{p.output: {}}
	ends.Each(func(o kadm.ListedOffset) { start[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), p.opts...), kgo.ConsumePartitions(start), kgo.FetchIsolationLevel(iso))...)
	if err != nil {
		return nil, fmt.Errorf("latency consumer: %w", err)
	}
	return cl, nil
}

// produce writes rate records per second for duration, spaced by schedule
// (record i is due at start+i/rate) rather than by per-record sleeps, and
// waits for every acknowledgement.
func (p *latencyProbe) produce(ctx context.Context, cl *kgo.Client, progress func(int64)) (int, error) {
	n := int(float64(p.rate) * p.duration.Seconds())
	var (
		mu   sync.Mutex
		perr error
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if perr == nil {
				perr = fmt.Errorf("latency producer: %s[%d]: %w", r.Topic, r.Partition, err)
			}
			mu.Unlock()
		}
	}
	start := time.Now()
	lastReport := start
	for i := 0; i < n && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(float64(i) / float64(p.rate) * float64(time.Second)))
		if d := time.Until(due); d > time.Millisecond {
			time.Sleep(d)
		}
		seq := p.firstSeq + int64(i)
		now := time.Now()
		sent := make([]byte, 8)
		binary.BigEndian.PutUint64(sent, uint64(now.UnixNano()))
		cl.Produce(ctx, &kgo.Record{
			Topic:     p.input,
			Key:       strconv.AppendInt(nil, seq, 10),
			Value:     datagen.Value(seq, now, p.size),
			Timestamp: now,
			Headers:   []kgo.RecordHeader{{Key: SentHeader, Value: sent}},
		}, promise)
		if progress != nil && now.Sub(lastReport) > 100*time.Millisecond {
			progress(int64(i))
			lastReport = now
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return n, fmt.Errorf("latency producer: flushing: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return n, perr
}
