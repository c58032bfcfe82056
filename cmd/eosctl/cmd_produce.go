package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newProduceCmd(g *globals) *cobra.Command {
	var cfg datagen.Config
	var lines, format, schema string
	cmd := &cobra.Command{
		Use:   "produce --topic TOPIC --count N",
		Short: "Write N test records with an idempotent producer",
		Long: `Creates TOPIC if it is missing and writes N records with an idempotent
producer (acks=all). Record i has key "i" (a decimal sequence number) and a
JSON value {"seq": i, "ts": <unix ms>, "user": "user-07", "amount": 12.3,
"pad": "..."} padded to exactly --size bytes. These are the records "eosctl
verify" checks the output against, key by key.

Into a new or empty topic the keys are 0..N-1. Into a topic that already
holds records, produce continues after the highest key there (it reads the
last records of each partition), so running it again, or after an
interrupted run, adds N new keys and never repeats one: a copy still
verifies as exactly once. --again writes keys 0..N-1 all the same, as a
producer re-sending what it sent would: the input of the dedup topology.
--keys K keys record i by i mod K instead, from seq 0 (its value still
carries seq i): events about K entities, such as the rows 0..K-1 of a
join's table written with --count K --compact. Such a topic is no input
"eosctl verify" judges key by key.

--lines FILE ("-": standard input) writes the lines of a text file instead,
one record per line (empty lines too), with the same keys: text for the
wordcount topology.

--format avro writes the same records as Avro in the Confluent wire format,
with the schema of --schema (by default the orders' own: seq, ts, user,
amount, pad) registered under the subject TOPIC-value of the Schema Registry
--schema-registry (or EOSCTL_SCHEMA_REGISTRY) names; --size then sizes the
JSON the values are made from. --format protobuf writes them as Protobuf
in the Confluent wire format, message Order of topologies/examples/order.proto
(or the first message of --schema FILE.proto), registered the same way.

--format json-schema writes the same JSON after the wire-format header (the
magic byte and the schema id), each value first validated against the JSON
Schema of --schema (by default the orders' own,
topologies/examples/order.schema.json), registered the same way.`,
		Example: `  eosctl produce --topic in --count 1000000
  eosctl produce --topic lines --lines README.md
  eosctl produce --topic orders --count 1000 --again    # the keys 0..999 once more
  eosctl produce --topic catalog --count 1000 --partitions 3 --compact   # a table for an etl join
  eosctl produce --topic events --count 100000 --keys 1000 --partitions 3  # events about its 1,000 rows
  eosctl produce --topic in --count 10000 --size 1024 --partitions 12 --rate 5000
  eosctl produce --topic orders-avro --count 1000 --format avro --schema-registry http://127.0.0.1:8081/apis/ccompat/v7
  eosctl produce --topic orders-js --count 1000 --format json-schema --schema-registry http://127.0.0.1:8081/apis/ccompat/v7
  eosctl produce --topic orders-proto --count 1000 --format protobuf --schema-registry http://127.0.0.1:8081/apis/ccompat/v7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case lines != "" && (cmd.Flags().Changed("count") || cmd.Flags().Changed("size")):
				return usage(fmt.Errorf("--lines writes one record per line of %s: it takes neither --count nor --size", lines))
			case lines == "" && !cmd.Flags().Changed("count"):
				return usage(fmt.Errorf("required flag \"count\" not set (or --lines FILE)"))
			case lines != "":
				if err := readLines(lines, &cfg); err != nil {
					return err
				}
			}
			if err := cfg.Validate(); err != nil {
				return usage(err)
			}
			if err := checkFormat(format); err != nil {
				return err
			}
			if schema != "" && format == "json" {
				return usage(fmt.Errorf("--schema is the schema of --format %s", strings.Join(kindNames(), "|")))
			}
			opts, err := g.clientOpts()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			if format != "json" {
				if lines != "" {
					return usage(fmt.Errorf("--lines writes text: it takes no --format %s", format))
				}
				rctx, cancel := context.WithTimeout(ctx, g.timeout)
				cfg.Encode, err = g.wireEncoder(rctx, wireformat.Kind(format), cfg.Topic, schema)
				cancel()
				if err != nil {
					return err
				}
			}
			cl, err := admin.Connect(ctx, g.timeout, append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))...)
			if err != nil {
				return err
			}
			defer cl.Close()
			var bar *countProgress
			if isTerminal(os.Stderr) {
				bar = newCountProgress(os.Stderr, "producing", cfg.Count)
				cfg.Progress = bar.set
			}
			res, err := datagen.Produce(ctx, cl, cfg)
			if bar != nil {
				bar.finish(err)
			}
			if err != nil {
				return err
			}
			secs := res.Elapsed.Seconds()
			fmt.Printf("produced %d records (keys %d..%d, %d bytes) to %s (%d partitions) in %.2fs: %.0f records/s\n",
				res.Records, res.FirstKey, res.FirstKey+res.Records-1, res.Bytes, cfg.Topic, res.Partitions, secs, float64(res.Records)/max(secs, 1e-9))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Topic, "topic", "", "topic to write to (required; created if missing)")
	f.Int64Var(&cfg.Count, "count", 0, "number of records (required, unless --lines)")
	f.StringVar(&lines, "lines", "", "write the lines of this text file (\"-\": standard input), one record each, instead of --count JSON records")
	f.IntVar(&cfg.Size, "size", 100, "size of each record value in bytes")
	f.Int32Var(&cfg.Partitions, "partitions", 6, "partitions if the topic is created")
	f.BoolVar(&cfg.Compact, "compact", false, "create the topic compacted (cleanup.policy=compact), as the table of an etl join wants: its latest row of every key kept for good")
	f.BoolVar(&cfg.Again, "again", false, "write keys 0..N-1 even if the topic holds records (a re-sending producer), instead of continuing after its highest key")
	f.Int64Var(&cfg.Keys, "keys", 0, "key record i by i mod this many keys, from seq 0 (events about that many entities, e.g. a join table's rows); 0: every record its own key")
	f.IntVar(&cfg.Rate, "rate", 0, "records per second (0: as fast as possible)")
	f.StringVar(&format, "format", "json", "json, avro or protobuf: the same records in Avro or Protobuf, Confluent wire format, schema registered with --schema-registry; json-schema: their JSON in the wire format, validated against a registered JSON Schema")
	f.StringVar(&schema, "schema", "", "schema file for --format avro, protobuf or json-schema (default: the orders' schema, topologies/examples/order.avsc, order.proto or order.schema.json)")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// readLines sets cfg's values and count to the lines of the file name
// ("-": standard input).
func readLines(name string, cfg *datagen.Config) error {
	r := os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return usage(fmt.Errorf("--lines: %w", err))
		}
		defer f.Close()
		r = f
	}
	values, err := datagen.Lines(r)
	if err != nil {
		return err
	}
	if len(values) == 0 {
		return usage(fmt.Errorf("--lines: %s has no lines", name))
	}
	cfg.Values, cfg.Count = values, int64(len(values))
	return nil
}
