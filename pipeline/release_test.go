package pipeline_test

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/testhook"
	"github.com/eosctl/eos/pipeline"
)

// reusing is a Forker and Releaser that writes every output into buffers
// of its own and, when told they are released, overwrites everything it
// handed out with 'X' before writing new outputs over it: an output the
// client still held when Released came would reach the topic spoiled.
type reusing struct {
	chunks   [][]byte // handed out since the last Released
	free     [][]byte
	released *atomic.Int64
}

func (r *reusing) Fork() pipeline.Transform { return &reusing{released: r.released} }

func (r *reusing) Released() {
	r.released.Add(1)
	for _, c := range r.chunks {
		c = c[:cap(c)]
		for i := range c {
			c[i] = 'X'
		}
		r.free = append(r.free, c[:0])
	}
	r.chunks = r.chunks[:0]
}

func (r *reusing) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	n := len(in.Value) + 1
	k := len(r.chunks) - 1
	if k < 0 || cap(r.chunks[k])-len(r.chunks[k]) < n {
		c := make([]byte, 0, 4096)
		if f := len(r.free); f > 0 {
			c, r.free = r.free[f-1], r.free[:f-1]
		}
		r.chunks = append(r.chunks, c)
		k++
	}
	c := r.chunks[k]
	v := append(append(c[len(c):len(c):len(c)+n], in.Value...), '!')
	r.chunks[k] = c[:len(c)+n]
	out.Emit(pipeline.Output{Key: in.Key, Value: v})
	return nil
}

// Released comes only once the client is done with every output emitted
// before it, after commits and aborts alike: the Transform overwrites the
// released bytes at once, and every record read back with read_committed
// is still its input plus "!". (Called after each poll, or before a
// transaction's flush, it spoils outputs and this fails.)
func TestReleasedComesOnlyOnceTheClientIsDoneWithTheOutputs(t *testing.T) {
	ctx, opts := embedded(t)
	const n, parts = 100000, 4
	produceBacklog(t, ctx, opts, "in", parts, n)

	tr := &reusing{released: new(atomic.Int64)}
	var consumed, aborted atomic.Int64
	w, err := pipeline.New(pipeline.Config{
		App: "reusing", Instance: "0", Inputs: []string{"in"}, Output: "out",
		CommitInterval: 5 * time.Millisecond, Parallelism: 2, ClientOpts: opts,
		OnEvent: func(e pipeline.Event) {
			switch e.Kind {
			case pipeline.EventCommitted:
				consumed.Add(int64(e.Consumed))
			case pipeline.EventAborted:
				aborted.Add(1)
			}
		},
	}, tr)
	if err != nil {
		t.Fatal(err)
	}
	runUntilConsumed(t, testhook.WithAbortFraction(ctx, 0.3), w, &consumed, n)
	if aborted.Load() == 0 || tr.released.Load() < 4 {
		t.Fatalf("%d transactions aborted and %d releases: the test needs both", aborted.Load(), tr.released.Load())
	}
	seen := map[string]bool{}
	for _, r := range readCommittedRecords(t, ctx, opts, n, "out") {
		v := r.Value
		i, err := strconv.Atoi(string(bytes.TrimSuffix(v, []byte("!"))))
		if err != nil || !bytes.HasSuffix(v, []byte("!")) || i < 0 || i >= n {
			t.Fatalf("output %q is no input plus \"!\": its bytes were reused while the client held them", v)
		}
		if seen[string(v)] {
			t.Fatalf("output %q twice", v)
		}
		seen[string(v)] = true
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct outputs, want %d", len(seen), n)
	}
}
