package pipeline

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/committed"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// summer holds back a sum of its records' values and emits it when the
// worker flushes: one output for a whole transaction's records.
type summer struct {
	sum, n  int64
	flushes int
}

func (s *summer) Process(_ context.Context, in *Record, _ Emitter) error {
	v, err := strconv.ParseInt(string(in.Value), 10, 64)
	if err != nil {
		return DeadLetter("not-a-number", err)
	}
	s.sum += v
	s.n++
	return nil
}

func (s *summer) Flush(_ context.Context, out Emitter) error {
	if s.n > 0 {
		out.Emit(Output{Key: []byte("sum"), Value: []byte(strconv.FormatInt(s.sum, 10) + "/" + strconv.FormatInt(s.n, 10))})
		s.flushes++
	}
	s.sum, s.n = 0, 0
	return nil
}

func (s *summer) Discard() { s.sum, s.n = 0, 0 }

// What a Flusher holds back commits exactly once, with the records it
// stands for: through transactions aborted on purpose and EndTxn responses
// lost (unknown outcomes, which reopen the session), the committed outputs
// add up to the input exactly, so held output is neither lost (Flush before
// every commit) nor counted twice (Discard whenever a transaction does not
// commit).
func TestHeldOutputCommitsExactlyOnceWithItsRecords(t *testing.T) {
	e := newStateEnv(t)
	const n = 20_000
	keys, values := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], values[i] = strconv.Itoa(i), strconv.Itoa(i+1)
	}
	produced := e.produce("st-in", 3, keys, values)
	s := &summer{}
	w := e.worker(s, nil)
	w.test = &testHooks{abortFraction: 0.3}
	go func() {
		for range 3 {
			time.Sleep(100 * time.Millisecond)
			e.faults.DropResponses(kmsg.EndTxn.Int16(), 1)
		}
	}()
	all := written(produced)
	if err := e.run(w, func() bool {
		return all() && e.faults.Dropped(kmsg.EndTxn.Int16()) == 3
	}); err != nil {
		t.Fatal(err)
	}
	rs, err := committed.Read(e.ctx, e.opts, "st-out")
	if err != nil {
		t.Fatal(err)
	}
	var sum, count int64
	outputs := 0
	for _, r := range committed.Flatten(rs) {
		var a, b int64
		if i := bytes.IndexByte(r.Value, '/'); i > 0 {
			a, _ = strconv.ParseInt(string(r.Value[:i]), 10, 64)
			b, _ = strconv.ParseInt(string(r.Value[i+1:]), 10, 64)
		}
		sum, count, outputs = sum+a, count+b, outputs+1
	}
	if want := int64(n) * (n + 1) / 2; sum != want || count != n {
		t.Fatalf("committed outputs add up to %d over %d records, want %d over %d", sum, count, want, n)
	}
	if w.stats.Aborted.Load() == 0 || w.stats.Reinits.Load() == 0 {
		t.Fatalf("%d aborts and %d re-initialisations: the faults did not happen, so this test proves nothing", w.stats.Aborted.Load(), w.stats.Reinits.Load())
	}
	t.Logf("%d records in %d committed outputs (%d flushed); %d aborts, %d re-initialisations", n, outputs, s.flushes, w.stats.Aborted.Load(), w.stats.Reinits.Load())
}
