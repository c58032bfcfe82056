package fencing

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTransactionalIDIsFixedAndValidated(t *testing.T) {
	for _, tc := range []struct {
		app, instance string
		want          string
		errHas        string
	}{
		{"orders", "0", "orders-0", ""},
		{"orders", "eos-2", "orders-eos-2", ""},
		{"", "0", "", "app name is empty"},
		{"orders", "", "", "instance id is empty"},
		{"orders", "a b", "", `character ' '`},
		{"orders", "pod/1", "", `character '/'`},
		{"orders", "..", "", "not allowed"},
		{strings.Repeat("a", 250), "0", "", "more than Kafka's limit"},
		{strings.Repeat("a", 200), strings.Repeat("b", 49), "", "more than 249"},
	} {
		got, err := TransactionalID(tc.app, tc.instance)
		if tc.errHas == "" {
			if err != nil || got != tc.want {
				t.Errorf("TransactionalID(%q, %q) = %q, %v; want %q", tc.app, tc.instance, got, err, tc.want)
			}
			again, _ := TransactionalID(tc.app, tc.instance)
			if again != got {
				t.Errorf("TransactionalID is not deterministic: %q then %q", got, again)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errHas) || !errors.Is(err, ErrInvalidName) {
			t.Errorf("TransactionalID(%q, %q) error = %v; want one containing %q", tc.app, tc.instance, err, tc.errHas)
		}
	}
}

func TestTransactionalIDsOfDifferentAppsDiffer(t *testing.T) {
	seen := map[string]string{}
	for _, app := range []string{"a", "b", "orders", "orders.v2", "orders_v2"} {
		for _, inst := range []string{"0", "1", "10"} {
			id, err := TransactionalID(app, inst)
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen[id]; ok {
				t.Fatalf("%s/%s and %s derive the same id %q", app, inst, prev, id)
			}
			seen[id] = app + "/" + inst
		}
	}
}

func TestIsFencedClassifiesKafkaErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason Reason
		fenced bool
	}{
		{kerr.ProducerFenced, ReasonProducerEpoch, true},
		{fmt.Errorf("wrapped: %w", kerr.InvalidProducerEpoch), ReasonProducerEpoch, true},
		{kerr.FencedInstanceID, ReasonInstanceID, true},
		{kerr.IllegalGeneration, "", false},
		{kerr.NotCoordinator, "", false},
		{nil, "", false},
	} {
		r, ok := IsFenced(tc.err)
		if ok != tc.fenced || r != tc.reason {
			t.Errorf("IsFenced(%v) = %q, %v; want %q, %v", tc.err, r, ok, tc.reason, tc.fenced)
		}
	}
	e := &FencedError{TransactionalID: "app-0", Reason: ReasonProducerEpoch, ProducerID: 7, Epoch: 3, CurrentEpoch: 4, Err: kerr.ProducerFenced}
	if !strings.Contains(e.Error(), `"app-0"`) || !strings.Contains(e.Error(), "epoch 3") || !strings.Contains(e.Error(), "current epoch 4") || !errors.Is(e, kerr.ProducerFenced) {
		t.Errorf("FencedError message lacks the id or the epochs: %s", e)
	}
}
