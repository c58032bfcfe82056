package topologies

import (
	"errors"
	"testing"

	"github.com/eosctl/eos/pipeline"
)

// A filter whose type is only known per record (a bare field) is checked
// per record: a boolean field filters (null counts as false, as in SQL),
// anything else is a dead letter, not a silent false.
func TestFilterOnABareFieldIsCheckedPerRecord(t *testing.T) {
	tr, err := NewETL(writeConfig(t, "f.yaml", "filter: paid\n"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	emit := emitFunc(func(pipeline.Output) { n++ })
	for _, v := range []string{`{"paid":true}`, `{"paid":false}`, `{"paid":null}`} {
		if err := tr.Process(t.Context(), &pipeline.Record{Value: []byte(v)}, emit); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	if n != 1 {
		t.Fatalf("%d records kept, want 1", n)
	}
	for _, v := range []string{`{"paid":"yes"}`, `{"paid":1}`, `{}`} {
		err := tr.Process(t.Context(), &pipeline.Record{Value: []byte(v)}, emit)
		var dl *pipeline.DeadLetterError
		if !errors.As(err, &dl) {
			t.Fatalf("%s: got %v, want a dead letter", v, err)
		}
		t.Logf("%s: %v", v, err)
	}
}
