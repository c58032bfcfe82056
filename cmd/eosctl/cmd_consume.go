package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newConsumeCmd(g *globals) *cobra.Command {
	var (
		topic   string
		limit   int
		hdrs    bool
		asJSON  bool
		last    bool
		timeout time.Duration
		waitFor int
		format  string
	)
	cmd := &cobra.Command{
		Use:   "consume --topic TOPIC",
		Short: "Print a topic as a read_committed consumer sees it, then exit",
		Long: `Reads TOPIC from the beginning to its last stable offset with
isolation.level=read_committed (what a downstream consumer of an eos app sees:
no record of an aborted or open transaction), prints one line per record and
exits. Partitions are printed one after the other, each in offset order.

Lines are "KEY<TAB>VALUE" (with --headers, then "<TAB>name=value" per header);
--json prints one object per record with partition, offset, key, value,
timestamp and headers. --last keeps only the last record of each key, which
turns a changelog-style output (wordcount's counts, aggregate's updates) into
its current totals. --wait-for N first waits, up to --read-timeout, until
the topic exists and holds at least N records a read_committed consumer can
read: for output a worker started a moment ago is still writing. It reads the whole topic into memory: it is for looking
at results, not for bulk export. It joins no group and commits nothing.

--format avro (or protobuf) decodes values in the Confluent wire format
(Avro, or Protobuf: fields by their .proto names, int64 as JSON integers,
enums by name, absent proto3 scalars as their defaults) with their writer
schemas from --schema-registry (or EOSCTL_SCHEMA_REGISTRY) and prints
them as JSON; a value that does not decode is printed as it is, and named
on stderr, and the command exits 1. --format json-schema prints the JSON
after the wire-format header, each value checked against its writer schema
the same way (json-schema-invalid on stderr if it is not valid).`,
		Example: `  eosctl consume --topic word-counts --last
  eosctl consume --topic orders-clean --max 2 --wait-for 2
  eosctl consume --topic spend-per-minute --json
  eosctl consume --topic orders-dlq --headers
  eosctl consume --topic orders-avro-clean --format avro --max 2
  eosctl consume --topic orders-js-clean --format json-schema --max 2
  eosctl consume --topic orders-proto --format protobuf --max 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			var dec wireformat.Decoder
			if format != "json" {
				cl, err := g.registryClient()
				if err != nil {
					return err
				}
				if dec, err = wireformat.Lookup(wireformat.Kind(format)).NewDecoder(cl, nil, nil); err != nil {
					return err
				}
			}
			c, err := g.connectAdmin(ctx)
			if err != nil {
				return err
			}
			defer c.close()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rs, err := readTopic(ctx, c, topic, waitFor)
			if err != nil {
				return err
			}
			if last {
				rs = lastPerKey(rs)
			}
			if limit > 0 && len(rs) > limit {
				rs = rs[:limit]
			}
			undecodable := 0
			if dec != nil {
				if undecodable, err = decodeValues(ctx, dec, rs); err != nil {
					return err
				}
			}
			w := bufio.NewWriter(os.Stdout)
			defer w.Flush()
			defer func() {
				if undecodable > 0 && err == nil {
					err = fmt.Errorf("%d value(s) of %s are not %s in the Confluent wire format (printed as they are)", undecodable, topic, format)
				}
			}()
			for _, r := range rs {
				if asJSON {
					printJSONRecord(w, r)
					continue
				}
				fmt.Fprintf(w, "%s\t%s", r.Key, r.Value)
				if hdrs {
					for _, h := range r.Headers {
						fmt.Fprintf(w, "\t%s=%s", h.Key, h.Value)
					}
				}
				fmt.Fprintln(w)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic to read (required)")
	f.IntVar(&limit, "max", 0, "print at most this many records (0: all)")
	f.BoolVar(&hdrs, "headers", false, "print each record's headers after its value")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per record")
	f.BoolVar(&last, "last", false, "print only the last record of each key")
	f.DurationVar(&timeout, "read-timeout", time.Minute, "how long reading the topic (and waiting for --wait-for) may take")
	f.IntVar(&waitFor, "wait-for", 0, "first wait until the topic exists and holds at least this many committed records")
	f.StringVar(&format, "format", "json", "json (values as they are), avro or protobuf: decode the Confluent wire format with --schema-registry; json-schema: strip its header, check the JSON against its schema")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// decodeValues replaces each wire-format Avro value by its JSON; values
// that are not are left as they are, named on stderr and counted.
func decodeValues(ctx context.Context, dec wireformat.Decoder, rs []*kgo.Record) (int, error) {
	bad := 0
	for _, r := range rs {
		js, err := dec.AppendJSON(ctx, nil, r.Value)
		var bd *wireformat.BadDataError
		switch {
		case errors.As(err, &bd):
			bad++
			fmt.Fprintf(os.Stderr, "consume: %s[%d] offset %d: %s: %v\n", r.Topic, r.Partition, r.Offset, bd.Reason, bd.Err)
		case err != nil:
			return bad, err
		default:
			r.Value = js
		}
	}
	return bad, nil
}

// readTopic reads topic as a read_committed consumer sees it. With
// waitFor > 0 it polls until the topic exists and holds at least waitFor
// records, or ctx ends; the error then says how far it got.
func readTopic(ctx context.Context, c *adminConn, topic string, waitFor int) ([]*kgo.Record, error) {
	seen, lastErr := -1, error(nil) // the last complete read's count, and the last error that was not the timeout
	for {
		_, err := admin.Partitions(ctx, c.cl, topic)
		var rs []*kgo.Record
		if err == nil {
			var byPart map[int32][]*kgo.Record
			byPart, err = committed.Read(ctx, c.opts, topic)
			rs = committed.Flatten(byPart)
		}
		if waitFor <= 0 || (err == nil && len(rs) >= waitFor) {
			return rs, err
		}
		switch {
		case err == nil:
			seen = len(rs)
		case ctx.Err() == nil:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			// A read cut by the timeout says nothing: report the last
			// one that finished.
			if seen < 0 && lastErr != nil {
				return nil, fmt.Errorf("waiting for %d records on %s: %w", waitFor, topic, lastErr)
			}
			if errors.Is(ctx.Err(), context.Canceled) {
				// SIGINT, not the timeout: the line says how far it
				// got, the wrapped error gives exit code 130.
				return nil, flagError{msg: fmt.Sprintf("waiting for %d records on %s: interrupted with %d there", waitFor, topic, max(seen, 0)), err: ctx.Err()}
			}
			return nil, fmt.Errorf("waiting for %d records on %s: %d after --read-timeout: %w", waitFor, topic, max(seen, 0), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// lastPerKey keeps the last record of each key, in the order of those last
// records.
func lastPerKey(rs []*kgo.Record) []*kgo.Record {
	lastAt := map[string]int{}
	for i, r := range rs {
		lastAt[string(r.Key)] = i
	}
	var out []*kgo.Record
	for i, r := range rs {
		if lastAt[string(r.Key)] == i {
			out = append(out, r)
		}
	}
	return out
}

func printJSONRecord(w *bufio.Writer, r *kgo.Record) {
	hs := map[string]string{}
	for _, h := range r.Headers {
		hs[h.Key] = string(h.Value)
	}
	v := map[string]any{
		"partition": r.Partition, "offset": r.Offset, "key": string(r.Key), "timestamp": r.Timestamp.UnixMilli(), "headers": hs,
	}
	if json.Valid(r.Value) && strings.TrimSpace(string(r.Value)) != "" {
		v["value"] = json.RawMessage(r.Value)
	} else {
		v["value"] = string(r.Value)
	}
	b, _ := json.Marshal(v)
	w.Write(b)
	w.WriteByte('\n')
}
