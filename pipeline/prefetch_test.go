package pipeline

import (
	"context"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// prefetching records what Prefetch was given and checks, in Process,
// that the record was among the latest Prefetch's records.
type prefetching struct {
	ahead     map[string]bool // partition/offset prefetched and not yet processed
	calls     int
	biggest   int
	unwarned  int // records processed without a prefetch before them
	processed int
}

func po(p int32, o int64) string { return strconv.Itoa(int(p)) + "/" + strconv.FormatInt(o, 10) }

func (f *prefetching) Prefetch(rs []*kgo.Record) {
	f.calls++
	f.biggest = max(f.biggest, len(rs))
	for _, r := range rs {
		f.ahead[po(r.Partition, r.Offset)] = true
	}
}

func (f *prefetching) Process(_ context.Context, in *Record, out Emitter) error {
	k := po(in.Partition, in.Offset)
	if !f.ahead[k] {
		f.unwarned++
	}
	delete(f.ahead, k)
	f.processed++
	out.Emit(Output{Key: in.Key, Value: in.Value})
	return nil
}

// A Prefetcher sees every record before Process does, in runs of at most
// PrefetchAhead records, and the copy is still exact.
func TestPrefetcherSeesEveryRecordBeforeProcess(t *testing.T) {
	e := newStateEnv(t)
	const n = 5_000
	keys, values := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], values[i] = strconv.Itoa(i), strconv.Itoa(i)
	}
	produced := e.produce("st-in", 3, keys, values)
	f := &prefetching{ahead: map[string]bool{}}
	w := e.worker(f, nil)
	if err := e.run(w, written(produced)); err != nil {
		t.Fatal(err)
	}
	if f.processed < n || f.unwarned != 0 || f.calls < n/PrefetchAhead || f.biggest > PrefetchAhead {
		t.Fatalf("%d records processed, %d without a Prefetch before them; %d Prefetch calls of up to %d records (want at most %d)",
			f.processed, f.unwarned, f.calls, f.biggest, PrefetchAhead)
	}
}
