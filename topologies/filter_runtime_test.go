package topologies

import (
	"errors"
	"fmt"
	"strings"
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

// The missing-field dead letter's hint works when followed: the default it
// suggests makes a filter keep or drop records without the field instead
// of dead-lettering them. The hint it replaced ($env.discount alone)
// dead-lettered every such record, and compiling it now warns.
func TestMissingFieldHintWorksWhenFollowed(t *testing.T) {
	emit := emitFunc(func(pipeline.Output) {})
	tr, err := NewETL(writeConfig(t, "typo.yaml", "filter: discount > 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = tr.Process(t.Context(), &pipeline.Record{Value: []byte(`{"seq":1}`)}, emit)
	_, hint, ok := strings.Cut(fmt.Sprint(err), "e.g. ")
	if !ok {
		t.Fatalf("no suggestion in %v", err)
	}
	hint = strings.TrimSuffix(hint, ")")

	var warnings []string
	warn := func(w string) { warnings = append(warnings, w) }
	for _, tc := range []struct {
		filter   string
		deadLets bool
		warns    bool
	}{
		{"(" + hint + ") > 0", false, false},
		{"$env.discount > 0", true, true},
	} {
		warnings = nil
		top, _ := Lookup("etl")
		tr, err := top.New(Options{Config: writeConfig(t, "f.yaml", "filter: "+tc.filter+"\n"), Warn: warn})
		if err != nil {
			t.Fatal(err)
		}
		var kept int
		err = tr.Process(t.Context(), &pipeline.Record{Value: []byte(`{"seq":1}`)}, emitFunc(func(pipeline.Output) { kept++ }))
		var dl *pipeline.DeadLetterError
		if errors.As(err, &dl) != tc.deadLets || kept != 0 {
			t.Errorf("filter %q on a record without the field: %v, %d kept; want dead letter %v", tc.filter, err, kept, tc.deadLets)
		}
		if err := tr.Process(t.Context(), &pipeline.Record{Value: []byte(`{"discount":5}`)}, emitFunc(func(pipeline.Output) { kept++ })); err != nil || kept != 1 {
			t.Errorf("filter %q on a record with discount 5: %v, %d kept; want it kept", tc.filter, err, kept)
		}
		if (len(warnings) > 0) != tc.warns || tc.warns && !strings.Contains(warnings[0], "f.yaml:1: filter:") {
			t.Errorf("filter %q: warnings %q; want a warning %v naming FILE:LINE: KEY", tc.filter, warnings, tc.warns)
		}
	}
}
