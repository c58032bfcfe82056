package pipeline

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// One sourceReader reads record after record back by coordinates, each
// exactly, whatever it read before: forwards, backwards, over two
// partitions, and a source below the log start as nil.
func TestSourceReaderReadsBackExactRecordsOneReadAfterAnother(t *testing.T) {
	e := newStateEnv(t)
	keys, values := make([]string, 400), make([]string, 400)
	for i := range keys {
		keys[i], values[i] = "k"+strconv.Itoa(i), "v"+strconv.Itoa(i)
	}
	where := <-e.produce("src", 2, keys, values)
	// The offset of each key in its partition: keys went out in order.
	offset := map[string]int64{}
	next := map[int32]int64{}
	for _, k := range keys {
		p := where[k]
		offset[k], next[p] = next[p], next[p]+1
	}
	r := newSourceReader(e.opts)
	defer r.close()
	for _, want := range [][]string{
		{"k300", "k350", "k399"},
		{"k0", "k1", "k2"}, // backwards, after a read further on
		{"k5", "k200", "k7", "k398", "k100"},
		{"k399"},
	} {
		var srcs []Source
		for _, k := range want {
			srcs = append(srcs, Source{Topic: "src", Partition: where[k], Offset: offset[k]})
		}
		recs, err := r.read(e.ctx, srcs)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range want {
			if recs[i] == nil || string(recs[i].Key) != k || string(recs[i].Value) != "v"+k[1:] {
				t.Fatalf("read %v: record %d is %v, want key %s", want, i, recs[i], k)
			}
		}
	}
	// Retention: the log of k0's partition now starts after k0.
	p := where["k0"]
	var later string
	for _, k := range keys[1:] {
		if where[k] == p {
			later = k
			break
		}
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "src", Partition: p, At: offset[later]})
	if resp, err := kadm.NewClient(e.cl).DeleteRecords(e.ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("deleting records: %v %v", err, resp.Error())
	}
	recs, err := r.read(e.ctx, []Source{{Topic: "src", Partition: p, Offset: offset["k0"]}, {Topic: "src", Partition: p, Offset: offset[later]}})
	if err != nil {
		t.Fatal(err)
	}
	if recs[0] != nil || recs[1] == nil || string(recs[1].Key) != later {
		t.Fatalf("after deleting k0: read %v, want nil and %s", recs, later)
	}
}
