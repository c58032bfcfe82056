package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/internal/seed"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Size scales a scenario: the short form in `go test`, the long form in
// `eosctl chaos`.
type Size struct {
	Records int64 // input records; the aggregate scenarios take half as many regular records at half the rate (aggregating.produce)
	Rate    int   // input records per second
	Faults  int   // faults to inject (kills, bounces, moves, drops)
}

// Short is the size `go test ./cmd/eosctl/internal/chaos/` uses.
var Short = Size{Records: 40_000, Rate: 10_000, Faults: 3}

// Long is the size `eosctl chaos` uses by default.
var Long = Size{Records: 100_000, Rate: 10_000, Faults: 6}

// Result is one row of the reliability table.
type Result struct {
	Scenario string `json:"scenario"`
	// Topology is what the workers ran: passthrough, judged by Verify, or
	// aggregate, judged by Aggregate.
	Topology  string           `json:"topology"`
	Records   int64            `json:"records"`
	Faults    string           `json:"faults"`
	Recovery  []time.Duration  `json:"recovery_ns,omitempty"`
	Verify    *verify.Report   `json:"verify"`
	Aggregate *aggcheck.Report `json:"aggregate,omitempty"`
	// Tail read the output during the faults; DeadLetterTail read the
	// dead-letter topic (aggregate only).
	Tail           *verify.TailReport `json:"concurrent_reader"`
	DeadLetterTail *verify.TailReport `json:"concurrent_dead_letter_reader,omitempty"`
	Notes          []string           `json:"notes,omitempty"`
	// Error is why the scenario failed besides its judges, as when it
	// stopped early or its faults proved nothing.
	Error   string        `json:"error,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Seed seeded the scenario's random instants and victims; EOS_TEST_SEED
	// set to it replays them (seed.Replay).
	Seed uint64 `json:"seed"`
}

// Stateful reports whether the row is of the aggregate topology.
func (r *Result) Stateful() bool {
	return r.Topology == topologyAggregate || r.Topology == topologySessions || r.Topology == topologyAvroAggregate || r.Topology == topologyProtobufAggregate
}

// OK reports whether exactly-once held: the judge of the row's topology
// passed (verify for a copy; for the aggregate, the reference computed from
// the input) and the concurrent read_committed readers saw no record twice.
// A row with an Error, or without its judge or its readers, is not OK.
func (r *Result) OK() bool {
	if r.Error != "" || r.Tail == nil || !r.Tail.OK() {
		return false
	}
	if r.Stateful() {
		return r.Aggregate != nil && r.Aggregate.OK() && r.DeadLetterTail != nil && r.DeadLetterTail.OK()
	}
	return r.Verify != nil && r.Verify.OK()
}

// AbortedReads counts records the concurrent read_committed readers saw
// twice: every one is a record that was visible and then written again,
// i.e. an aborted or torn transaction leaking. -1 means no reader finished.
func (r *Result) AbortedReads() int64 {
	if r.Tail == nil {
		return -1
	}
	n := r.Tail.Duplicates
	if r.DeadLetterTail != nil {
		n += r.DeadLetterTail.Duplicates
	}
	return n
}

// Summary says in one paragraph what the judges and readers found.
func (r *Result) Summary() string {
	var parts []string
	switch {
	case r.Verify != nil:
		parts = append(parts, r.Verify.Summary())
	case r.Aggregate != nil:
		parts = append(parts, r.Aggregate.Summary())
	default:
		parts = append(parts, "not judged")
	}
	for _, t := range []*verify.TailReport{r.Tail, r.DeadLetterTail} {
		if t != nil {
			parts = append(parts, t.String())
		}
	}
	if r.Error != "" {
		parts = append(parts, "error: "+r.Error)
	}
	return strings.Join(parts, "; ")
}

// RecoveryP50 and RecoveryMax summarise how long workers took to commit again
// after a fault.
func (r *Result) RecoveryP50() time.Duration { return percentile(r.Recovery, 0.5) }
func (r *Result) RecoveryMax() time.Duration { return percentile(r.Recovery, 1) }

// Scenario is one fault drill.
type Scenario struct {
	Name        string
	Description string
	// Topology is what the workers run: passthrough or aggregate.
	Topology string
	// OnKafka describes the drill's Apache Kafka form where it differs
	// (broker faults made with real nodes); empty if it is the same.
	OnKafka string
	// OnlyKafka marks a drill that needs Apache Kafka (several real nodes
	// behind proxies); on the embedded broker it is not run.
	OnlyKafka bool
	run       func(ctx context.Context, h *harness, sz Size, res *Result, w workload) error
}

// Scenarios lists the drills in the order RELIABILITY.md presents them:
// the passthrough copies, then the same faults against the aggregate
// topology.
func Scenarios() []Scenario {
	clean := Scenario{Name: "broker-clean-bounce", OnKafka: "a rolling restart: each node of the 3-node Apache Kafka cluster in turn stopped with SIGTERM mid-run and restarted after 500ms", Description: "stop the `eosctl broker` process with SIGTERM mid-run and restart it on the same port and data dir", run: func(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
		return brokerBounce(ctx, h, sz, res, w, false)
	}}
	hard := Scenario{Name: "broker-hard-bounce", OnKafka: "a random node of the 3-node Apache Kafka cluster SIGKILLed at an arbitrary instant mid-run and restarted after 500ms", Description: "SIGKILL the `eosctl broker` process (persistent --data-dir, --sync-writes) between two requests mid-run and restart it on the same port", run: func(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
		return brokerBounce(ctx, h, sz, res, w, true)
	}}
	moves := Scenario{Name: "coordinator-moves", OnKafka: "the node coordinating a worker's transactions SIGKILLed mid-transaction (its __transaction_state partition fails over) and restarted", Description: "3-node embedded cluster: group and transaction coordinators moved to other nodes mid-transaction", run: coordinatorMoves}
	leaders := Scenario{Name: "partition-leader-moves", OnKafka: "leaders of the app's partitions moved by reassignment with the replicas rotated and a preferred-leader election, and the node leading the output's partition 0 SIGKILLed, in turn", Description: "3-node embedded cluster: leaders of input, output and internal partitions moved to other nodes mid-transaction (shuffle, move, election in turn)", run: partitionLeaderMoves}
	lost := Scenario{Name: "lost-responses", Description: "responses to EndTxn, TxnOffsetCommit, AddPartitionsToTxn and Produce dropped after the broker applied them (connection broken)", run: lostResponses}
	slow := Scenario{Name: "slow-coordinator", Description: "EndTxn and TxnOffsetCommit responses held back longer than the worker's 2s request timeout", run: slowCoordinator}
	partition := Scenario{Name: "network-partition", OnlyKafka: true, Description: "Apache Kafka only: the node coordinating a worker's transactions cut off from clients, replication and the quorum for 12s, longer than the 6s session and 5s request timeouts, twice per fault", run: networkPartition}
	tvSwitch := Scenario{Name: "transaction-version-switch", OnlyKafka: true, Description: "Apache Kafka only: the cluster's transaction.version feature switched from 2 (KIP-890) to 1 and back while workers run", run: transactionVersionSwitch}
	timeout := Scenario{Name: "txn-timeout", Description: "a worker frozen (SIGSTOP) longer than its 2s transaction.timeout.ms: the coordinator aborts its transaction", run: txnTimeout}
	return []Scenario{
		clean,
		hard,
		moves, leaders, lost, slow, timeout, partition, tvSwitch,
		{Name: "transactional-input", Description: "the input itself written in transactions, a third of them aborted (control markers in the input)", run: transactionalInput},
		{Name: "single-partition-order", Description: "one partition, workers SIGKILLed mid-transaction: output order equals input order", run: singlePartitionOrder},
		{Name: "kip848-group", Description: "KIP-848 consumer group protocol (broker-side assignment), SIGKILLs and a rebalance 1 → 2 workers", run: kip848},
		{Name: "dedup-kills", Topology: topologyDedup, Description: "the dedup topology (key seq, every record written twice), workers SIGKILLed mid-transaction: every seq once", run: dedupKills},
		{Name: "session-kills", Topology: topologySessions, Description: "the aggregate topology with session windows (a gap of 1s, records held back to bridge sessions), workers SIGKILLed mid-transaction: every session equals the reference sessioniser's, once", run: sessionKills},
		{Name: "avro-kills", Topology: topologyAvro, Description: "the etl topology on Avro topics (the Confluent wire format, a real Schema Registry), workers SIGKILLed mid-transaction: every key once, each output decoded by hamba/avro with the output schema and equal to its input's fields", run: avroKills},
		{Name: "avro-aggregate-kills", Topology: topologyAvroAggregate, Description: "the aggregate topology reading Avro (aggcheck's records in the Confluent wire format, a real Schema Registry), workers SIGKILLed mid-transaction: every window and late record's dead letter exactly once, judged against the JSON the input was encoded from", run: avroAggregateKills},
		{Name: "jsonschema-kills", Topology: topologyJSONSchema, Description: "the etl topology on JSON Schema topics (the Confluent wire format, a real Schema Registry), every record validated against its writer schema (one key in 97 written invalid) and every output against the output schema, workers SIGKILLed mid-transaction: every valid key once, each output read by encoding/json equal to its input's fields, every invalid key dead-lettered once as json-schema-invalid", run: jsonSchemaKills},
		{Name: "protobuf-kills", Topology: topologyProtobuf, Description: "the etl topology on Protobuf topics (the Confluent wire format, a real Schema Registry, .proto compiled at run time), workers SIGKILLed mid-transaction: every key once, each output decoded by dynamicpb and protojson (not the workers' protowire code) and equal to its input's fields", run: protobufKills},
		{Name: "protobuf-aggregate-kills", Topology: topologyProtobufAggregate, Description: "the aggregate topology reading Protobuf (aggcheck's records in the Confluent wire format, a real Schema Registry), workers SIGKILLed mid-transaction: every window and late record's dead letter exactly once, judged against the JSON the input was encoded from", run: protobufAggregateKills},
		{Name: "join-kills", Topology: topologyJoin, Description: "the etl topology joining each record with a table row of its key (the table written before the events), workers SIGKILLed mid-transaction, each restart restoring the table: every key once, each with its row's price", run: joinKills},
		stateful(clean), stateful(hard), stateful(moves), stateful(leaders), stateful(lost), stateful(slow), stateful(timeout), stateful(partition),
	}
}

// Describe says what the drill does against Apache Kafka (kafka) or the
// embedded broker.
func (s Scenario) Describe(kafka bool) string {
	if kafka && s.OnKafka != "" {
		return s.OnKafka
	}
	return s.Description
}

// stateful is the aggregate counterpart of a passthrough drill: the same
// faults, with workers running the aggregate topology.
func stateful(s Scenario) Scenario {
	s.Description = "the faults of " + s.Name + ", against the aggregate topology (windows, changelog, repartition topic)"
	if s.OnKafka != "" {
		s.OnKafka = s.Description
	}
	s.Name = topologyAggregate + "-" + s.Name
	s.Topology = topologyAggregate
	return s
}

// Run runs one scenario on embedded brokers with the eosctl binary bin;
// logs receives the processes' stderr.
func Run(ctx context.Context, s Scenario, bin string, sz Size, logs io.Writer) (*Result, error) {
	return RunOn(ctx, nil, s, bin, sz, logs)
}

// RunOn runs one scenario against the Apache Kafka cluster kafka (see
// StartKafka), or on embedded brokers when kafka is nil. Its random
// instants and victims are drawn from the seed in EOS_TEST_SEED, or a fresh
// one, returned in Result.Seed. On Apache Kafka
// every broker-side fault is made with the cluster's own processes and
// proxies: nodes SIGKILLed at arbitrary instants or stopped with SIGTERM,
// the coordinator's node lost, leaders moved by reassignment and election,
// responses dropped or held by the proxies.
func RunOn(ctx context.Context, kafka *kafkacluster.Cluster, s Scenario, bin string, sz Size, logs io.Writer) (*Result, error) {
	sd, err := seed.Draw()
	if err != nil {
		return nil, err
	}
	h, err := newHarness(bin, logs)
	if err != nil {
		return nil, err
	}
	h.kafka = kafka
	h.rng = seed.New(sd)
	defer h.close()
	if s.OnlyKafka && kafka == nil {
		return nil, fmt.Errorf("%s: runs only against Apache Kafka", s.Name)
	}
	topology := cmp.Or(s.Topology, topologyPassthrough)
	w := newWorkload(topology)
	defer w.close()
	res := &Result{Scenario: s.Name, Topology: topology, Seed: sd}
	start := time.Now()
	err = s.run(ctx, h, sz, res, w)
	res.Elapsed = time.Since(start)
	if err != nil {
		res.Error = err.Error()
		return res, fmt.Errorf("%s: %w", s.Name, err)
	}
	return res, nil
}

// runWith is the common shape: n workers run w's topology on app-in while
// faults run, then the output is judged. sz.Records 0 means the input is
// already written.
func runWith(ctx context.Context, h *harness, sz Size, res *Result, w workload, app string, partitions int32, workers int, workerArgs []string, faults func() error) error {
	in, out := app+"-in", app+"-out"
	topology, err := w.topology(h)
	if err != nil {
		return err
	}
	h.topology = topology
	produced := make(<-chan error)
	if sz.Records > 0 {
		if produced, err = w.produce(ctx, h, in, partitions, sz.Records, sz.Rate); err != nil {
			return err
		}
	} else {
		done := make(chan error, 1)
		done <- nil
		produced = done
	}
	if err := w.watch(ctx, h, app, out); err != nil {
		return err
	}
	for i := range workers {
		if err := h.startWorker(ctx, app, i, in, out, workerArgs...); err != nil {
			return err
		}
	}
	if err := faults(); err != nil {
		return err
	}
	if err := <-produced; err != nil {
		return fmt.Errorf("producing input: %w", err)
	}
	return w.finish(ctx, h, res, app, in, out, partitions)
}

// spread sleeps so that n faults are spread over the input's production time.
func spread(sz Size, n int) time.Duration {
	total := time.Duration(float64(sz.Records) / float64(sz.Rate) * float64(time.Second))
	return total / time.Duration(n+1)
}

func brokerBounce(ctx context.Context, h *harness, sz Size, res *Result, w workload, hard bool) error {
	// The input is written before the first fault: kfake does not persist
	// idempotent producers' sequence state across a crash, so a producer
	// retrying through a broker SIGKILL can duplicate input records, which
	// would blur what is being judged. The workers are slowed down instead
	// (a 2ms RTT and 50-record transactions) so that the copy spans the
	// bounces.
	if err := h.processBroker(ctx, "--rtt", "2ms"); err != nil {
		return err
	}
	if h.kafka != nil {
		return nodeBounce(ctx, h, sz, res, w, hard)
	}
	produced, err := w.produce(ctx, h, "bounce-in", 6, sz.Records, 0)
	if err != nil {
		return err
	}
	if err := <-produced; err != nil {
		return err
	}
	how := "SIGTERMs"
	if hard {
		how = "SIGKILLs (between two requests)"
	}
	res.Faults = fmt.Sprintf("%d broker %s, 500ms down each", sz.Faults, how)
	defer func() {
		if hard {
			res.Faults += fmt.Sprintf(" (%d open transactions aborted by the restarted broker's crash recovery)", h.interrupted.Load())
		}
	}()
	var bounces []time.Time
	sz.Records = 0 // already produced
	err = runWith(ctx, h, sz, res, w, "bounce", 6, 2, []string{"--max-txn-records", "50"}, func() error {
		for range sz.Faults {
			time.Sleep(time.Second)
			at, err := h.bounceBroker(ctx, 500*time.Millisecond, hard)
			if err != nil {
				return err
			}
			bounces = append(bounces, at)
		}
		return nil
	})
	for _, at := range bounces {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	if err == nil && len(res.Recovery) < sz.Faults {
		err = fmt.Errorf("only %d worker commits followed the %d bounces: the copy finished before the faults, so they proved nothing", len(res.Recovery), sz.Faults)
	}
	return err
}

func coordinatorMoves(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	if err := h.inProcessBroker(ctx, broker.Config{Nodes: 3}); err != nil {
		return err
	}
	if h.kafka != nil {
		return coordinatorLoss(ctx, h, sz, res, w)
	}
	c := h.b.Cluster()
	res.Faults = fmt.Sprintf("%d coordinator moves", sz.Faults*2)
	var moves []time.Time
	err := runWith(ctx, h, sz, res, w, "moves", 6, 2, nil, func() error {
		for range sz.Faults * 2 {
			time.Sleep(spread(sz, sz.Faults*2))
			c.RehashCoordinators() // partition leaders: partitionLeaderMoves
			moves = append(moves, time.Now())
		}
		return nil
	})
	for _, at := range moves {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	return err
}

// partitionLeaderMoves moves partition leaders while the workers run, in
// turn: every partition of the cluster at once (ShufflePartitionLeaders),
// every partition of the app's topics one node over (MoveTopicPartition),
// and an election on every partition (an ElectLeaders request). Each move
// bumps the partition's leader epoch, so every fetcher and producer, the
// workers and the readers alike, is told it talks to a former leader,
// refreshes its metadata and validates its position on the new leader
// (KIP-320). The broker's EpochGuard corrects kfake's answer to that
// validation when nothing was appended since the move; the row's notes say
// how often.
func partitionLeaderMoves(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	if err := h.inProcessBroker(ctx, broker.Config{Nodes: 3}); err != nil {
		return err
	}
	const app = "leaders"
	n := sz.Faults * 4
	res.Faults = fmt.Sprintf("%d partition-leader moves", n)
	var moves []time.Time
	err := runWith(ctx, h, sz, res, w, app, 6, 2, nil, func() error {
		for i := range n {
			time.Sleep(spread(sz, n))
			if err := h.moveLeaders(ctx, app, i%3); err != nil {
				return err
			}
			moves = append(moves, time.Now())
		}
		return nil
	})
	for _, at := range moves {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	if h.kafka != nil {
		res.Faults = fmt.Sprintf("%d partition-leader moves: reassignment with the replicas rotated and a preferred-leader election, and the SIGKILL of the node leading %s-out[0], in turn", n, app)
		return err
	}
	g := h.b.EpochGuard()
	res.Notes = append(res.Notes, fmt.Sprintf("%d partition answers in %d OffsetForLeaderEpoch requests corrected by the embedded broker's EpochGuard (kfake answers an epoch with nothing appended yet as undefined)", g.Corrected(), g.Answered()))
	return err
}

// lostResponses drops responses the broker has already applied: the
// worker cannot know whether its request took effect. For EndTxn it must
// neither produce the transaction's records again (a duplicate) nor carry
// on so that they fold into a later transaction (a torn transaction,
// KAFKA-17754). Every armed EndTxn drop must land while the input flows,
// or the drill proved nothing; the other drops are counted in the row
// (a Produce drop armed near the end of the input may find no Produce
// left, and under KIP-890 AddPartitionsToTxn is never sent).
func lostResponses(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	faults := &broker.Faults{}
	if err := h.inProcessBroker(ctx, broker.Config{Faults: faults}); err != nil {
		return err
	}
	faults = h.faultsOr(faults)
	keys := []kmsg.Key{kmsg.EndTxn, kmsg.TxnOffsetCommit, kmsg.AddPartitionsToTxn, kmsg.Produce}
	err := runWith(ctx, h, sz, res, w, "lost", 4, 2, nil, func() error {
		for i := range sz.Faults * len(keys) {
			time.Sleep(spread(sz, sz.Faults*len(keys)))
			faults.DropResponses(keys[i%len(keys)].Int16(), 1)
		}
		// Each armed EndTxn drop lands on the next commit, while the
		// workers still have input to commit (the last is armed with a
		// third of the input to come).
		key := kmsg.EndTxn.Int16()
		for deadline := time.Now().Add(30 * time.Second); faults.Dropped(key) < sz.Faults && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if got := faults.Dropped(key); got < sz.Faults {
			return fmt.Errorf("only %d of %d EndTxn responses were dropped: no transaction ended in 30s, so the drill proved nothing", got, sz.Faults)
		}
		return nil
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k.Name(), faults.Dropped(k.Int16())))
	}
	res.Faults = "responses dropped: " + strings.Join(parts, ", ")
	if faults.Dropped(kmsg.AddPartitionsToTxn.Int16()) == 0 {
		res.Notes = append(res.Notes, "no AddPartitionsToTxn was sent: under KIP-890 (transaction.version 2) partitions join the transaction implicitly with the first Produce")
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d producer re-initialisations after unknown outcomes", h.Count("reinit")))
	return err
}

func slowCoordinator(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	faults := &broker.Faults{}
	if err := h.inProcessBroker(ctx, broker.Config{Faults: faults}); err != nil {
		return err
	}
	faults = h.faultsOr(faults)
	keys := []kmsg.Key{kmsg.EndTxn, kmsg.TxnOffsetCommit}
	err := runWith(ctx, h, sz, res, w, "slow", 4, 2, []string{"--request-timeout", "2s"}, func() error {
		for i := range sz.Faults * len(keys) {
			time.Sleep(spread(sz, sz.Faults*len(keys)))
			faults.DelayResponses(keys[i%len(keys)].Int16(), 1, 3*time.Second)
		}
		return nil
	})
	res.Faults = fmt.Sprintf("responses held 3s (request timeout 2s): EndTxn %d, TxnOffsetCommit %d", faults.Delayed(kmsg.EndTxn.Int16()), faults.Delayed(kmsg.TxnOffsetCommit.Int16()))
	res.Notes = append(res.Notes, fmt.Sprintf("%d producer re-initialisations after unknown outcomes", h.Count("reinit")))
	return err
}

// txnTimeout freezes a worker past its transaction timeout, each time while
// its transaction is open, so that the coordinator aborts it under the
// worker, which must re-initialise in place, not exit. The input is paced to
// last through every freeze: a freeze of a worker with nothing left to
// consume would hold no transaction and prove nothing.
func txnTimeout(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	if err := h.inProcessBroker(ctx, broker.Config{}); err != nil {
		return err
	}
	const freeze = 4 * time.Second
	paced := sz
	paced.Rate = max(1, min(sz.Rate, int(float64(sz.Records)/(time.Duration(sz.Faults)*(freeze+4*time.Second)).Seconds())))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	h.Supervise(sctx)
	var resumed []time.Time
	open := 0
	err := runWith(ctx, h, paced, res, w, "timeout", 4, 2, []string{"--transaction-timeout", "2s", "--session-timeout", "10s"}, func() error {
		for i := range sz.Faults {
			time.Sleep(time.Second)
			name := fencing.ID("timeout", strconv.Itoa(i%2))
			if admin.WaitOngoing(ctx, h.Client, name, 2*time.Second) {
				open++
			}
			w := h.Worker(name)
			_ = w.Signal(syscall.SIGSTOP)
			time.Sleep(freeze)
			_ = w.Signal(syscall.SIGCONT)
			resumed = append(resumed, time.Now())
			time.Sleep(time.Second)
		}
		return nil
	})
	stop()
	for _, at := range resumed {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	res.Faults = fmt.Sprintf("%d freezes of %s against a 2s transaction timeout, %d of them with the transaction open (input paced to last through them)", sz.Faults, freeze, open)
	exits := h.Exits()
	exited := len(exits)
	for name, codes := range exits {
		res.Notes = append(res.Notes, fmt.Sprintf("%s exited with %v and was restarted", name, codes))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d re-initialisations in place", h.Count("reinit")))
	switch {
	case err != nil:
	case open == 0:
		err = fmt.Errorf("none of the %d freezes found the worker's transaction open: the drill proved nothing", sz.Faults)
	case exited > 0:
		// The group still knows a frozen worker (its session timeout is
		// longer than the freeze): it must re-initialise in place.
		err = fmt.Errorf("%d worker(s) exited instead of re-initialising in place: %v", exited, res.Notes)
	}
	return err
}

func singlePartitionOrder(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	if err := h.inProcessBroker(ctx, broker.Config{}); err != nil {
		return err
	}
	res.Faults = fmt.Sprintf("%d SIGKILLs mid-transaction", sz.Faults)
	return runWith(ctx, h, sz, res, w, "order", 1, 2, nil, func() error {
		for i := range sz.Faults {
			time.Sleep(spread(sz, sz.Faults))
			name := fencing.ID("order", strconv.Itoa(h.rng.IntN(2)))
			if err := h.KillAndRestart(ctx, name); err != nil {
				return err
			}
			_ = i
		}
		return nil
	})
}

func kip848(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	// A KIP-848 static member that dies without leaving keeps its instance
	// id until the broker-side session timeout (45s by default); its
	// restart is refused with UNRELEASED_INSTANCE_ID until then.
	cfg := broker.Config{BrokerConfigs: map[string]string{"group.consumer.session.timeout.ms": "6000", "group.consumer.heartbeat.interval.ms": "500"}}
	if err := h.inProcessBroker(ctx, cfg); err != nil {
		return err
	}
	res.Faults = fmt.Sprintf("%d SIGKILLs, then a second worker joins", sz.Faults)
	args := []string{"--group-protocol", "consumer"}
	return runWith(ctx, h, sz, res, w, "kip848", 6, 1, args, func() error {
		for range sz.Faults {
			time.Sleep(spread(sz, sz.Faults+1))
			if err := h.KillAndRestart(ctx, "kip848-0"); err != nil {
				return err
			}
		}
		return h.startWorker(ctx, "kip848", 1, "kip848-in", "kip848-out", args...)
	})
}
