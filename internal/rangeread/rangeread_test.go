package rangeread

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// layout writes one partition of topic t: offsets 0-2 committed, 3 a
// commit marker, 4-5 aborted, 6 an abort marker, 7-8 committed, 9 a commit
// marker, then 10-11 of a transaction left open. It returns the context
// the test runs under and the options that reach the broker.
func layout(t *testing.T) (context.Context, []kgo.Opt) {
	t.Helper()
	b, err := broker.Start(broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := kgo.NewClient(append(opts, kgo.TransactionalID("rr"), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	txn := func(end string, vals ...string) { // end: commit, abort or open
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if end != "open" {
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(end == "commit")); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn("commit", "a", "b", "c")
	txn("abort", "x", "y")
	txn("commit", "d", "e")
	txn("open", "open1", "open2")

	return ctx, opts
}

// A range ending under commit markers and aborted records completes and
// yields exactly the committed data records inside it, in order; a range
// ending inside a transaction still open cannot complete, and ctx's end
// says how far each partition got.
func TestReadYieldsTheCommittedRecordsOfARangeAndSaysWhereItStopped(t *testing.T) {
	ctx, opts := layout(t)
	read := func(ctx context.Context, s PartitionRange) ([]string, error) {
		var got []string
		err := Read(ctx, opts, Ranges{"t": {s}}, Options{}, func(r *kgo.Record) { got = append(got, string(r.Value)) })
		return got, err
	}
	for _, c := range []struct {
		span PartitionRange
		want string
	}{
		{PartitionRange{0, 0, 10}, "[a b c d e]"}, // ends on a marker
		{PartitionRange{0, 1, 7}, "[b c]"},        // ends on a marker after aborted records
		{PartitionRange{0, 4, 9}, "[d e]"},        // starts inside the aborted transaction
		{PartitionRange{0, 5, 5}, "[]"},           // empty
	} {
		got, err := read(ctx, c.span)
		if err != nil || fmt.Sprint(got) != c.want && !(c.want == "[]" && got == nil) {
			t.Errorf("Read %+v = %v, %v; want %s", c.span, got, err, c.want)
		}
	}
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	got, err := read(short, PartitionRange{0, 7, 12})
	var se *ShortReadError
	if !errors.As(err, &se) || len(se.Partitions) != 1 || se.Partitions[0] != (ShortPartition{"t", 0, 10, 12}) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reading into an open transaction: %v, %v; want a ShortReadError for t[0] at 10 of 12", got, err)
	}
	if !strings.Contains(err.Error(), "t[0] at offset 10 of 12") {
		t.Errorf("the error does not say where t[0] stopped: %v", err)
	}
	if fmt.Sprint(got) != "[d e]" {
		t.Fatalf("before stopping short, read %v, want [d e]", got)
	}
}

// Readable sees through markers and aborted records: a range holding only
// a commit marker (what a caught-up eos worker leaves behind its committed
// offset), or aborted records and their marker, has nothing a
// read_committed consumer would get; a range with a committed record does.
func TestReadableSeesThroughMarkersAndAbortedRecords(t *testing.T) {
	ctx, opts := layout(t)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		span PartitionRange
		want bool
	}{
		{PartitionRange{0, 3, 4}, false}, // a commit marker only
		{PartitionRange{0, 4, 7}, false}, // aborted records and their marker
		{PartitionRange{0, 2, 3}, true},  // a committed record
		{PartitionRange{0, 3, 8}, true},  // markers and aborted records, then a committed record
		{PartitionRange{0, 5, 5}, false}, // empty
	} {
		got, err := Readable(ctx, opts, Ranges{"t": {c.span}})
		if err != nil || got["t"][0] != c.want {
			t.Errorf("Readable %+v = %v, %v; want %v", c.span, got, err, c.want)
		}
	}
}

// One Reader reads range after range with the same client, each exactly,
// whatever it read before (forwards, backwards, a Readable between), and
// after a read that stopped short it starts over with a new client that
// reads as well.
func TestReaderKeepsItsClientAcrossReadsAndReadsEachRangeExactly(t *testing.T) {
	ctx, opts := layout(t)
	r := NewReader(opts, Options{})
	defer r.Close()
	read := func(ctx context.Context, pr PartitionRange) (string, error) {
		var got []string
		err := r.Read(ctx, Ranges{"t": {pr}}, func(rec *kgo.Record) { got = append(got, string(rec.Value)) })
		return fmt.Sprint(got), err
	}
	var first *kgo.Client
	for i, c := range []struct {
		pr   PartitionRange
		want string
	}{
		{PartitionRange{0, 7, 10}, "[d e]"},
		{PartitionRange{0, 0, 3}, "[a b c]"}, // backwards, after a read further on
		{PartitionRange{0, 1, 9}, "[b c d e]"},
		{PartitionRange{0, 8, 9}, "[e]"},
	} {
		got, err := read(ctx, c.pr)
		if err != nil || got != c.want {
			t.Fatalf("read %d %+v = %s, %v; want %s", i, c.pr, got, err, c.want)
		}
		if i == 0 {
			first = r.cl
		} else if r.cl != first {
			t.Fatalf("read %d made a new client after reads that succeeded", i)
		}
		if got, err := r.Readable(ctx, Ranges{"t": {{0, 3, 7}}}); err != nil || got["t"][0] {
			t.Fatalf("Readable of markers and aborted records between reads = %v, %v; want false", got, err)
		}
	}
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	if _, err := read(short, PartitionRange{0, 7, 12}); !errors.As(err, new(*ShortReadError)) {
		t.Fatalf("reading into the open transaction: %v, want a ShortReadError", err)
	}
	if r.cl != nil {
		t.Fatal("the reader kept its client after a read that failed")
	}
	if got, err := read(ctx, PartitionRange{0, 0, 10}); err != nil || got != "[a b c d e]" {
		t.Fatalf("after the failed read: %s, %v; want [a b c d e]", got, err)
	}
}
