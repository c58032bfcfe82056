package eos_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/txn"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every package's errors answer to the root vocabulary with errors.Is, so a
// program needs no other package's error types to decide what to do.
func TestEveryPackageSpeaksTheRootVocabulary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A port nothing listens on: Ping's real unreachable error.
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	unreachable := admin.Ping(ctx, cl, time.Second)
	_, invalid := fencing.TransactionalID("orders", "pod/1")
	for _, tc := range []struct {
		name string
		err  error
		is   error
	}{
		{"fenced worker", fmt.Errorf("run: %w", &fencing.FencedError{TransactionalID: "a-0", Err: kerr.ProducerFenced}), eos.ErrFenced},
		{"raw fenced code", txn.Word(fmt.Errorf("end: %w", kerr.ProducerFenced)), eos.ErrFenced},
		{"kafka ACL", txn.Denied(kerr.TopicAuthorizationFailed, "WRITE", "Topic", "out"), eos.ErrAuth},
		{"raw ACL code", txn.Word(kerr.GroupAuthorizationFailed), eos.ErrAuth},
		{"database credentials", fmt.Errorf("sink: %w: password", sink.ErrAuth), eos.ErrAuth},
		{"invalid name", invalid, eos.ErrConfig},
		{"bad setting", eos.BadConfig("pipeline.Config.App", "empty"), eos.ErrConfig},
		{"no broker", unreachable, eos.ErrUnreachable},
	} {
		if tc.err == nil || !errors.Is(tc.err, tc.is) {
			t.Errorf("%s: %v does not match %v", tc.name, tc.err, tc.is)
		}
	}
	if txn.Word(errors.New("disk full")) != nil {
		t.Error("txn.Word gave a word to an error that is not Kafka's fenced or auth")
	}
	if errors.Is(fencing.ErrInvalidName, eos.ErrAuth) || errors.Is(sink.ErrAuth, eos.ErrConfig) {
		t.Error("a sentinel matches a word it is not")
	}
}
