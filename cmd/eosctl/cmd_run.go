package main

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/gctune"
	"github.com/eosctl/eos/internal/testhook"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/spf13/cobra"
)

func newRunCmd(g *globals) *cobra.Command {
	var (
		cfg    pipeline.Config
		inputs string
		events string
		topo   topologies.Options
		mopts  runMetrics
		abort  float64
		// idemKey is the flag's positive form of Config.NoIdempotencyKey.
		idemKey bool
	)
	cmd := &cobra.Command{
		Use:   "run TOPOLOGY --app APP --instance ID --input TOPIC[,TOPIC...] --output TOPIC",
		Short: "Run one exactly-once worker of a topology",
		Long: `Runs one worker (one instance of an app). It consumes the input topics in the
consumer group APP with read_committed, passes each record through TOPOLOGY,
and commits the produced records and the consumed offsets in one transaction
every --commit-interval (or every --max-txn-records records, if sooner).

The worker's transactional.id and static group.instance.id are both
"APP-ID": fixed, derived only from --app and --instance, never random. Run
each instance with its own --instance (0, 1, 2... or $(hostname) in a
Kubernetes StatefulSet) and restart it with the same one: the restart fences
the old incarnation, aborts its open transaction, and resumes from the
committed offsets. Two live workers with the same --instance is a zombie
situation: the older one is fenced and exits with code 3.

A missing input topic is waited for, up to --input-wait (default 30s, 0
fails at once), so that a worker started together with the producer of its
input does not race it; then it is bad input (exit 2).

The output topic is created if missing (partitions: as the first input). Every
output record carries an eos-idempotency-key header naming its source
record, for consumers that cannot read with read_committed;
--idempotency-key=false leaves it off (read_committed consumers do not need
it, and it is about a quarter of the bytes of a 100-byte record).

With --commit-interval auto the worker chooses its interval as it runs: the
shortest that keeps the time it spends committing (flush, offset commit,
EndTxn) under --eos-overhead-budget of wall time (default 3%), at most
--max-commit-interval (default 5s). A commit costs a few round trips whatever
the transaction holds, so on a fast network auto commits often and on a slow
one it waits longer; "eosctl bench --intervals auto" shows where it settles.

Records a topology cannot handle (malformed JSON, a missing field, an
expression that fails, a record later than its window's grace period) go to
the dead-letter topic --dlq (default APP-dlq) in the same transaction, with
headers naming the reason, the error, the source topic, partition and offset
and the topology; the worker goes on. Stateful topologies (aggregate,
dedup, wordcount) keep their state in memory, write every change to the compacted
topic APP-STORE-changelog in the same transaction, and restore it from there
(read_committed) whenever partitions are assigned, before processing them.
An etl with a join (join: {table: TOPIC, ...}) reads its table topic, which
must have as many partitions as the input (else exit 2), for the partitions
it is assigned before processing them, and up to its end again before each
poll's records.
Config errors stop the worker at start with FILE:LINE: KEY: REASON (exit 2);
"eosctl topology check" finds them without running.

SIGINT or SIGTERM commits the open transaction and exits 0.

Unless GOGC or GOMEMLIMIT is set, the worker raises GOGC while its live heap
is small (under 50 MiB), keeping 128 MiB between the live heap and the next
collection under a soft limit of 200 MiB: its bounded fetches keep the heap
small, and with the default GOGC it collected so often that it spent 0.2-0.3
CPU seconds per million 100-byte records more than a hand-written loop.

Metrics: --metrics-addr (default 127.0.0.1:9464, "" disables) serves
Prometheus /metrics (commits, aborts, latencies, producer epoch, fences,
LSO lag and consumer lag of its partitions, open and hanging transactions,
franz-go client metrics), /healthz and /readyz (200 while it has partitions,
is not fenced, and committed within max(30s, 10 x --commit-interval) or has
nothing to consume). If the default port is taken (a second worker on this
host), a free port is used and logged; an address given with the flag or
the variable that is taken fails start-up.

Topologies: ` + strings.Join(topologies.Names(), ", "),
		Example: `  eosctl run passthrough --app copy --instance 0 --input in --output out
  eosctl run etl --config topologies/examples/etl-big-orders.yaml --app orders-etl --instance 0 --input orders --output orders-clean
  eosctl run aggregate --config topologies/examples/aggregate-user-minute.yaml --app spend --instance 0 --input orders --output spend --dlq spend-late
  eosctl run wordcount --app words --instance 0 --input lines --output word-counts
  eosctl run passthrough --app copy --instance $(hostname) --input a,b --output out --commit-interval 1s
  eosctl run passthrough --app copy --instance 0 --input in --output out --commit-interval auto --eos-overhead-budget 2%
  eosctl run passthrough --app copy --instance 1 --input in --output out --metrics-addr 127.0.0.1:9474`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(fmt.Errorf("run takes exactly one TOPOLOGY (one of: %s), got %d arguments", strings.Join(topologies.Names(), ", "), len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkAutoFlags(cmd, cfg.AutoInterval); err != nil {
				return err
			}
			t, err := topologies.Lookup(args[0])
			if err != nil {
				return usage(err)
			}
			if cfg.Logger, err = g.logger(); err != nil {
				return err
			}
			if cfg.ClientOpts, err = g.clientOpts(); err != nil {
				return err
			}
			cfg.StartTimeout = g.timeout
			cfg.NoIdempotencyKey = !idemKey
			cfg.Inputs = append(cfg.Inputs, splitList(inputs)...)
			onEvent, closeEvents, err := eventsFlag(events)
			if err != nil {
				return err
			}
			defer closeEvents()
			cfg.OnEvent = onEvent
			// The start is logged once the worker has connected, checked
			// its topics and initialised its producer, so that a worker
			// that cannot start prints only its one-line error.
			var exp *runExporter
			var started atomic.Bool
			cfg.OnEvent = pipeline.Chain(cfg.OnEvent, func(ev pipeline.Event) {
				if ev.Kind == pipeline.EventStarted && !started.Swap(true) {
					cfg.Logger.Info("worker started", "topology", t.Name, "transactional_id", fencing.ID(cfg.App, cfg.Instance), "inputs", cfg.Inputs, "output", cfg.Output, "metrics", exp.url())
				}
			})
			exp, err = mopts.wire(&cfg)
			if err != nil {
				return err
			}
			topo.Warn = func(w string) { cfg.Logger.Warn("topology configuration: " + w) }
			topo.Output, topo.SchemaRegistry = cfg.Output, g.schemaRegistry()
			transform, err := t.New(topo)
			if errors.Is(err, eos.ErrUnreachable) {
				return fmt.Errorf("topology %s: %w", t.Name, err) // the schema registry: exit 1, not bad input
			}
			if err != nil {
				return usage(fmt.Errorf("topology %s: %w", t.Name, err))
			}
			cfg.Topology = t.Name
			exp.watch(transform, &cfg)
			w, err := pipeline.New(cfg, transform)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			if err := exp.start(ctx); err != nil {
				return err
			}
			// A worker's live heap is small (its fetches are bounded), and
			// GOGC=100 then collects every few tens of MiB; see gctune.
			if gctune.Start(ctx, gctune.DefaultHeadroom, time.Second) {
				cfg.Logger.Debug("GC headroom kept at 128 MiB under a 200 MiB soft limit while the live heap is small (set GOGC or GOMEMLIMIT to choose yourself)")
			}
			err = w.Run(testhook.WithAbortFraction(ctx, abort))
			s := w.Stats()
			if started.Load() {
				cfg.Logger.Info("worker stopped", "committed", s.Committed.Load(), "aborted", s.Aborted.Load(), "consumed", s.Consumed.Load(), "produced", s.Produced.Load(), "reinits", s.Reinits.Load())
			}
			exp.finish(ctx, err)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.App, "app", "", "application name: the consumer group id and transactional.id prefix (required)")
	f.StringVar(&cfg.Instance, "instance", "", "this worker's fixed instance id, e.g. 0 or $(hostname) (required)")
	f.StringVar(&inputs, "input", "", "comma-separated input topics (required)")
	f.StringVar(&cfg.Output, "output", "", "output topic (required; created if missing)")
	f.DurationVar(&cfg.InputWait, "input-wait", 30*time.Second, "how long to wait at start for a missing input topic to be created (0: fail at once)")
	f.Int32Var(&cfg.OutputPartitions, "output-partitions", 0, "partitions of the output topic if it is created (default: as the first input)")
	autoIntervalFlags(f, &cfg.CommitInterval, &cfg.AutoInterval, &cfg.OverheadBudget, &cfg.MaxCommitInterval,
		"how often to commit, counted from the start of the previous commit (default 100ms), or auto: the shortest interval that keeps commits under --eos-overhead-budget")
	f.BoolVar(&idemKey, "idempotency-key", true, "add the eos-idempotency-key header to every output record (false: leave it off; only read_committed consumers are then exactly-once)")
	f.IntVar(&cfg.MaxTxnRecords, "max-txn-records", 0, "commit once a transaction has consumed this many records (0: no limit)")
	f.IntVar(&cfg.Parallelism, "parallelism", 0, "goroutines that process a large poll's records at once, for topologies whose records are independent (etl; the others ignore it): 0 means one per core (GOMAXPROCS), at most 4; 1 processes every record on the worker's goroutine")
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", 0, "consumer group session timeout (default 10s)")
	f.DurationVar(&cfg.TransactionTimeout, "transaction-timeout", 0, "transaction.timeout.ms: the coordinator aborts a transaction open longer (default 60s)")
	f.StringVar(&events, "events", "", `write lifecycle events (started, committed, aborted, reinit, fenced, stopped) as JSON lines to this file, or "-" for stdout`)
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", 0, "how long to wait for a broker's answer to a request without its own timeout, e.g. EndTxn (default 10s)")
	f.StringVar(&cfg.GroupProtocol, "group-protocol", "classic", "consumer group protocol: classic, or consumer (KIP-848, Kafka 4.0+)")
	f.StringVar(&topo.Config, "config", "", "configuration file, for topologies that take one (etl, aggregate, dedup; see eosctl topology list)")
	f.StringVar(&cfg.DLQ, "dlq", "", "dead-letter topic for records the topology cannot handle (default APP-dlq)")
	mopts.flags(f)
	f.Float64Var(&abort, "test-abort-fraction", 0, "abort this fraction of transactions on purpose (testing only)")
	_ = f.MarkHidden("test-abort-fraction")
	for _, req := range []string{"app", "instance", "input", "output"} {
		_ = cmd.MarkFlagRequired(req)
	}
	return cmd
}
