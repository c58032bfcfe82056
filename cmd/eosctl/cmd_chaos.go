package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/chaos"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/internal/seed"
	"github.com/spf13/cobra"
)

func newChaosCmd(g *globals) *cobra.Command {
	var (
		names    string
		sz       = chaos.Long
		jsonFile string
		verbose  bool
		soak     time.Duration
		kafka    bool
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run the fault-injection suite and print the reliability table",
		Long: `Runs fault drills against real eosctl worker processes on an embedded broker
and judges each with verify (read_committed, after the faults) and a
read_committed reader running during them. Every passthrough scenario must
end with zero duplicates, zero missing records, zero aborted reads (records
the concurrent reader saw twice) and input order kept per partition. Every
aggregate-* scenario runs the same faults against the aggregate topology
(state, changelog, repartition topic) and must end with every window result
equal to a reference computed in memory from the input, every late record
and poison pill dead-lettered exactly once, and zero aborted reads of
results or dead letters.

Scenarios:
` + scenarioList() + `
--scenario takes names, "all", or a topology: "passthrough" or "aggregate".

With --kafka the scenarios run against a 3-node Apache Kafka 4.4 cluster
(replication factor 3, min.insync.replicas 2) that eosctl starts from Maven
Central's jars (Java 17+ and Maven needed; the jars are cached in
~/.cache/eos), with TCP proxies in front of every node for the lost and
delayed responses and the network partition. There the broker faults are
real: nodes SIGKILLed at arbitrary instants, the transaction coordinator's
node lost, leaders moved by reassignment and election.
The tables it prints are the ones in RELIABILITY.md. "go test ./cmd/eosctl/internal/chaos/" runs
the same scenarios in a short form. Exits 1 if any scenario fails.`,
		Example: `  eosctl chaos
  eosctl chaos --scenario aggregate
  eosctl chaos --kafka --scenario broker-hard-bounce,network-partition
  eosctl chaos --scenario broker-clean-bounce,txn-timeout --records 200000 --faults 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sz.Records <= 0 || sz.Rate <= 0 || sz.Faults <= 0 {
				return usage(fmt.Errorf("--records, --rate and --faults must be positive"))
			}
			scenarios, err := chaos.Lookup(strings.Split(names, ","), kafka)
			if err != nil {
				return usage(err)
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			if soak > 0 {
				return runSoak(ctx, self, soak, sz.Rate, jsonFile)
			}
			var cluster *kafkacluster.Cluster
			if kafka {
				fmt.Fprintln(os.Stderr, "starting a 3-node Apache Kafka cluster")
				if cluster, err = chaos.StartKafka(ctx, func(f string, a ...any) { fmt.Fprintf(os.Stderr, "  "+f+"\n", a...) }); err != nil {
					return err
				}
				defer cluster.Stop()
			}
			var results []*chaos.Result
			failed := 0
			for _, s := range scenarios {
				fmt.Fprintf(os.Stderr, "running %s: %s\n", s.Name, s.Describe(kafka))
				var logs io.Writer // nil discards the workers' logs
				if verbose {
					logs = os.Stderr
				}
				res, err := chaos.RunOn(ctx, cluster, s, self, sz, logs)
				if res != nil {
					fmt.Fprintf(os.Stderr, "  %s: %s\n", s.Name, seed.Replay(res.Seed))
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "  %s: %v\n", s.Name, err)
					failed++
					if res == nil {
						continue
					}
				} else if !res.OK() {
					failed++
				}
				results = append(results, res)
			}
			chaos.WriteTable(os.Stdout, results, "eosctl "+strings.Join(os.Args[1:], " "))
			if jsonFile != "" {
				if err := writeJSON(jsonFile, results); err != nil {
					return err
				}
			}
			if failed > 0 {
				return verifyFailed{fmt.Sprintf("chaos: %d scenario(s) failed", failed)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&names, "scenario", "all", "comma-separated scenarios, all, passthrough or aggregate")
	f.Int64Var(&sz.Records, "records", sz.Records, "input records per scenario (aggregate scenarios: half as many, plus late records and poison pills)")
	f.IntVar(&sz.Rate, "rate", sz.Rate, "input records per second")
	f.IntVar(&sz.Faults, "faults", sz.Faults, "faults per scenario (kills, bounces, moves, drops)")
	f.StringVar(&jsonFile, "json", "", "also write every result as JSON to this file")
	f.BoolVar(&verbose, "verbose", false, "show the workers' logs")
	f.BoolVar(&kafka, "kafka", false, "run against a 3-node Apache Kafka cluster started for the run instead of embedded brokers")
	f.DurationVar(&soak, "soak", 0, "instead of the scenarios, copy a steady stream at --rate for this long (e.g. 30m), sampling throughput, worker RSS and goroutines")
	return cmd
}

func scenarioList() string {
	var b strings.Builder
	width := 0
	for _, s := range chaos.Scenarios() {
		width = max(width, len(s.Name))
	}
	for _, s := range chaos.Scenarios() {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, s.Name, s.Description)
	}
	return b.String()
}

// runSoak runs the long steady run and prints its samples and verdict.
func runSoak(ctx context.Context, bin string, d time.Duration, rate int, jsonFile string) error {
	fmt.Fprintf(os.Stderr, "soak: %s at %d records/s with 2 workers\n", d, rate)
	res, err := chaos.Soak(ctx, bin, d, rate, max(d/30, time.Second), nil)
	if err != nil {
		return err
	}
	fmt.Println("elapsed   output rec/s   worker RSS   goroutines")
	for _, s := range res.Samples {
		fmt.Printf("%8s  %12.0f  %9.1fMiB  %10d\n", s.At.Round(time.Second), s.OutputRate, float64(s.RSSBytes)/(1<<20), s.Goroutines)
	}
	fmt.Printf("RSS growth after warm-up %+.1f%%, goroutines %+d; %s; %s\n", 100*res.RSSGrowth(), res.GoroutineGrowth(), res.Verify.Summary(), res.Tail)
	if jsonFile != "" {
		if err := writeJSON(jsonFile, res); err != nil {
			return err
		}
	}
	if err := res.Verdict(); err != nil {
		fmt.Println(err)
		return verifyFailed{err.Error()}
	}
	return nil
}
