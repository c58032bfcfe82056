// Package verify judges whether a pipeline copied its input to its output
// exactly once, for tests, benchmarks and operators checking a live pipeline
// (eosctl verify).
//
// The input is expected to be what eos's data generator (eosctl produce)
// writes: every record's key
// is a distinct decimal sequence number. [Run] reads both topics as a
// read_committed consumer sees them and reports every output record whose key
// was already seen (duplicate), every input key never seen (missing), every
// output key that is not an input key (unexpected), and every place where an
// output partition carries records of one input partition out of their input
// order. [Tail] watches a topic while faults are injected, for the
// duplicates a read_committed consumer would have observed along the way.
//
// A stateful topology's output is no copy of its input: [NewTailBy] watches
// it by an identity of the caller's choosing (a window, say) instead of the
// key.
//
// Neither joins a consumer group or commits offsets, so they can be pointed at
// a live cluster without disturbing it.
package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultTimeout bounds a [Run] whose Config.Timeout is zero.
const DefaultTimeout = 2 * time.Minute

// Config says what [Run] compares.
type Config struct {
	// Input is the topic the pipeline read, with datagen keys.
	Input string
	// Output is the topic the pipeline wrote.
	Output string
	// Timeout bounds the whole run, listing and both reads. Zero means
	// DefaultTimeout; the context can cut it shorter.
	Timeout time.Duration
	// Reading, if set, is called once the offsets to read are listed,
	// before the reads begin, with the number of offsets of each topic
	// that will be read: for a command that says what a long read does.
	Reading func(inputOffsets, outputOffsets int64)
}

// Report is the judgment of one [Run]. Counts are of records; each example
// list holds at most 10 entries, in the order they were found (for Missing,
// ascending key order).
type Report struct {
	Input  string `json:"input"`
	Output string `json:"output"`

	// InputRecords and OutputRecords count the data records read.
	InputRecords  int64 `json:"input_records"`
	OutputRecords int64 `json:"output_records"`

	// Duplicates counts extra copies: output records whose key an earlier
	// output record already had. A key written three times counts two.
	Duplicates int64 `json:"duplicates"`
	// Missing counts input keys with no output record.
	Missing int64 `json:"missing"`
	// Unexpected counts output records whose key is not an input key,
	// including nil and non-decimal keys. They are not also counted as
	// duplicates, however often they repeat.
	Unexpected int64 `json:"unexpected"`
	// OrderViolations counts, per output partition, the records that came
	// from the same input partition as an earlier record of that output
	// partition but from a lower input offset. Each descent counts once:
	// a record moved late is one violation, as is a record moved early.
	// Only the first copy of a duplicated key takes part.
	OrderViolations int64 `json:"order_violations"`

	// InputDuplicates counts input records whose key an earlier input
	// record already had. datagen never writes those (a second run into a
	// topic continues after its highest key); another producer may. Then
	// the judgment is about the first copy of each key only, and a
	// faithful copy shows up as duplicates.
	InputDuplicates int64 `json:"input_duplicates"`

	DuplicateExamples      []string         `json:"duplicate_examples,omitempty"`
	MissingExamples        []string         `json:"missing_examples,omitempty"`
	UnexpectedExamples     []string         `json:"unexpected_examples,omitempty"`
	OrderExamples          []OrderViolation `json:"order_examples,omitempty"`
	InputDuplicateExamples []string         `json:"input_duplicate_examples,omitempty"`

	// InputRanges and OutputRanges are the offsets that were read.
	InputRanges  []PartitionRange `json:"input_ranges"`
	OutputRanges []PartitionRange `json:"output_ranges"`

	// Elapsed is how long the run took; in JSON, in nanoseconds.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// OrderViolation is one record that came out of order: in output partition
// OutputPartition at OutputOffset, it carries key Key from input partition
// InputPartition at InputOffset, but an earlier record of the same output
// partition carried that input partition's PrevInputOffset, which is larger.
type OrderViolation struct {
	Key             string `json:"key"`
	OutputPartition int32  `json:"output_partition"`
	OutputOffset    int64  `json:"output_offset"`
	InputPartition  int32  `json:"input_partition"`
	InputOffset     int64  `json:"input_offset"`
	PrevInputOffset int64  `json:"prev_input_offset"`
}

// String describes the violation as output and input coordinates
// (partition@offset).
func (v OrderViolation) String() string {
	return fmt.Sprintf("key %s at output %d@%d has input %d@%d after %d@%d",
		v.Key, v.OutputPartition, v.OutputOffset, v.InputPartition, v.InputOffset, v.InputPartition, v.PrevInputOffset)
}

// OK reports whether the output is an exactly-once, order-preserving copy:
// no duplicates, nothing missing, nothing unexpected, no order violations.
func (r *Report) OK() bool {
	return r.Duplicates == 0 && r.Missing == 0 && r.Unexpected == 0 && r.OrderViolations == 0
}

// MarshalJSON adds "ok" to the fields, so that a report written as JSON
// carries the verdict.
func (r *Report) MarshalJSON() ([]byte, error) {
	type report Report // without methods, so this does not recurse
	return json.Marshal(struct {
		OK bool `json:"ok"`
		*report
	}{r.OK(), (*report)(r)})
}

// String is Summary.
func (r *Report) String() string { return r.Summary() }

// Summary renders the report as one paragraph for people.
func (r *Report) Summary() string {
	var b strings.Builder
	verdict := "OK"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "verify %s -> %s: %s: %d input records, %d output records; ", r.Input, r.Output, verdict, r.InputRecords, r.OutputRecords)
	count := func(n int64, what string, ex []string) {
		fmt.Fprintf(&b, "%d %s", n, what)
		if len(ex) > 0 {
			fmt.Fprintf(&b, " (e.g. %s)", strings.Join(ex, " "))
		}
	}
	count(r.Duplicates, "duplicates", r.DuplicateExamples)
	b.WriteString(", ")
	count(r.Missing, "missing", r.MissingExamples)
	b.WriteString(", ")
	count(r.Unexpected, "unexpected", quoteAll(r.UnexpectedExamples))
	b.WriteString(", ")
	var order []string
	for _, v := range r.OrderExamples {
		order = append(order, v.String())
	}
	fmt.Fprintf(&b, "%d order violations", r.OrderViolations)
	if len(order) > 0 {
		fmt.Fprintf(&b, " (e.g. %s)", strings.Join(order, "; "))
	}
	fmt.Fprintf(&b, "; read in %v.", r.Elapsed.Round(time.Millisecond))
	if r.InputDuplicates > 0 {
		fmt.Fprintf(&b, " WARNING: the input itself repeats %d keys (e.g. %s): they were written more than once (by eosctl produce --again, a producer that re-sent, or a second writer; a plain rerun of produce continues after the highest key), and verify judged the first copy of each.",
			r.InputDuplicates, strings.Join(r.InputDuplicateExamples, " "))
	}
	return b.String()
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// keyInfo is what Run keeps per input key: 16 bytes.
type keyInfo struct {
	inOff  int64  // input offset of the key's first record
	inPart int32  // input partition + 1; 0 means not an input key
	outN   uint32 // output copies seen, saturating
}

// Run reads cfg.Input and cfg.Output and judges the output; see [Report].
//
// opts configure how to reach the cluster (seed brokers, TLS, SASL, ...)
// and must not configure consuming: Run creates its own clients from them,
// one for listing offsets and one read_committed, group-less consumer per
// topic, and closes them before returning.
//
// Both topics are judged as of the moment Run starts: it lists each
// partition's last stable offset first and reads exactly up to it, so
// records written meanwhile are ignored, and Run should be called only
// once the pipeline has caught up. Running it earlier reports the lag as
// missing records, not as an error.
//
// Errors are reserved for when no judgment could be made: a topic does not
// exist (the error wraps kerr.UnknownTopicOrPartition and names it), a
// fetch fails, or the reads did not reach the listed end within the timeout
// (a *ShortReadError naming the partitions). A bad verdict is a Report
// whose OK is false, with a nil error.
//
// Memory is about 16 bytes per input key when keys are decimals below
// twice the number of input records, as datagen's are, and a map entry per
// key otherwise.
func Run(ctx context.Context, opts []kgo.Opt, cfg Config) (*Report, error) {
	switch {
	case cfg.Input == "" || cfg.Output == "":
		return nil, errors.New("verify: both an input and an output topic are required")
	case cfg.Input == cfg.Output:
		return nil, fmt.Errorf("verify: input and output are the same topic %q", cfg.Input)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()

	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("verify: creating client: %w", err)
	}
	snap, err := snapshot(ctx, kadm.NewClient(cl), cfg.Input, cfg.Output)
	cl.Close()
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Input:        cfg.Input,
		Output:       cfg.Output,
		InputRanges:  snap[cfg.Input],
		OutputRanges: snap[cfg.Output],
	}

	var expected, outOffsets int64
	var inParts int32
	for _, r := range rep.InputRanges {
		expected += r.End - r.Start
		inParts = max(inParts, r.Partition+1)
	}
	if cfg.Reading != nil {
		for _, r := range rep.OutputRanges {
			outOffsets += r.End - r.Start
		}
		cfg.Reading(expected, outOffsets)
	}
	keys := newKeyTable[keyInfo](2*expected + 1024)

	err = readRanges(ctx, opts, cfg.Input, rep.InputRanges, func(r *kgo.Record) {
		rep.InputRecords++
		k := keys.slot(r.Key)
		if k.inPart != 0 {
			rep.InputDuplicates++
			addExample(&rep.InputDuplicateExamples, render(r.Key))
			return
		}
		k.inPart, k.inOff = r.Partition+1, r.Offset
	})
	if err != nil {
		return nil, err
	}

	// last[outPart][inPart] is the input offset of the latest record of
	// input partition inPart seen in output partition outPart, or -1.
	last := make(map[int32][]int64)
	err = readRanges(ctx, opts, cfg.Output, rep.OutputRanges, func(r *kgo.Record) {
		rep.OutputRecords++
		k := keys.lookup(r.Key)
		if k == nil || k.inPart == 0 {
			rep.Unexpected++
			addExample(&rep.UnexpectedExamples, render(r.Key))
			return
		}
		if k.outN < ^uint32(0) {
			k.outN++
		}
		if k.outN > 1 {
			rep.Duplicates++
			addExample(&rep.DuplicateExamples, render(r.Key))
			return
		}
		l := last[r.Partition]
		if l == nil {
			l = slices.Repeat([]int64{-1}, int(inParts))
			last[r.Partition] = l
		}
		ip := k.inPart - 1
		if prev := l[ip]; prev > k.inOff {
			rep.OrderViolations++
			addExample(&rep.OrderExamples, OrderViolation{
				Key:             render(r.Key),
				OutputPartition: r.Partition,
				OutputOffset:    r.Offset,
				InputPartition:  ip,
				InputOffset:     k.inOff,
				PrevInputOffset: prev,
			})
		}
		l[ip] = k.inOff
	})
	if err != nil {
		return nil, err
	}

	for i := range keys.dense {
		if k := &keys.dense[i]; k.inPart != 0 && k.outN == 0 {
			rep.Missing++
			addExample(&rep.MissingExamples, fmt.Sprint(i))
		}
	}
	var sparseMissing []string
	for key, k := range keys.sparse {
		if k.inPart != 0 && k.outN == 0 {
			rep.Missing++
			sparseMissing = append(sparseMissing, key)
		}
	}
	slices.Sort(sparseMissing)
	for _, key := range sparseMissing {
		addExample(&rep.MissingExamples, render([]byte(key)))
	}

	rep.Elapsed = time.Since(start)
	return rep, nil
}
