// Command fraud is a custom exactly-once processor built on package
// pipeline: the example to copy when the built-in topologies are not enough.
//
// For every order (the JSON records `eosctl produce` writes) it keeps, per
// user, the number of orders and their total in keyed state, and
//
//   - emits the order to the default output with the user's running count
//     and total added;
//   - emits an alert to the named output "alerts" when an order is more than
//     three times the user's average so far (after at least five orders);
//   - dead-letters records that are not orders.
//
// The state is changelogged to <app>-spend-changelog in the same transaction
// as the outputs and the offset commit, and restored on every assignment, so
// a crash or a rebalance never counts an order twice or forgets one. The
// input is keyed by sequence number, so the processor first re-keys orders
// by user through <app>-by-user-repartition (Declaration.Repartition), so
// that each user's state lives in one partition.
//
//	eosctl broker &
//	eosctl produce --topic orders --count 100000
//	go run ./examples/fraud --input orders --output orders-scored --alerts fraud-alerts
//	eosctl consume --topic fraud-alerts
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Scorer is the processor.
type Scorer struct {
	Alerts string // topic of the "alerts" output
}

// Declare tells the worker what Scorer needs: a store, a repartition topic,
// a named output, and a dead-letter topic created at start.
func (s Scorer) Declare() pipeline.Declaration {
	return pipeline.Declaration{
		Stores:      []string{"spend"},
		Repartition: "by-user",
		Outputs:     map[string]string{"alerts": s.Alerts},
		DeadLetters: true,
	}
}

type order struct {
	Seq    int64   `json:"seq"`
	User   string  `json:"user"`
	Amount float64 `json:"amount"`
}

// Process sees each record twice: from the input (re-key it by user) and
// back from the repartition topic (score it against the user's state).
func (Scorer) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	var o order
	if err := json.Unmarshal(in.Value, &o); err != nil {
		return pipeline.DeadLetter("malformed-json", err)
	}
	if o.User == "" {
		return pipeline.DeadLetter("missing-field", errors.New(`no "user"`))
	}
	if !in.Repartitioned {
		out.Emit(pipeline.Output{To: "by-user", Key: []byte(o.User), Value: in.Value})
		return nil
	}
	st := in.Store("spend")
	n, total := decode(st.Get(o.User))
	if n >= 5 && o.Amount > 1.8*total/float64(n) {
		alert := fmt.Appendf(nil, `{"user":%q,"seq":%d,"amount":%g,"average":%g}`, o.User, o.Seq, o.Amount, total/float64(n))
		out.Emit(pipeline.Output{To: "alerts", Key: []byte(o.User), Value: alert})
	}
	n, total = n+1, total+o.Amount
	st.Put(o.User, encode(n, total))
	scored := fmt.Appendf(nil, `{"seq":%d,"user":%q,"amount":%g,"orders":%d,"total":%g}`, o.Seq, o.User, o.Amount, n, total)
	out.Emit(pipeline.Output{Key: []byte(o.User), Value: scored})
	return nil
}

// The state of a user: order count and total, 16 bytes.
func encode(n int64, total float64) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(n))
	return binary.BigEndian.AppendUint64(b, math.Float64bits(total))
}

func decode(v []byte, ok bool) (int64, float64) {
	if !ok || len(v) != 16 {
		return 0, 0
	}
	return int64(binary.BigEndian.Uint64(v)), math.Float64frombits(binary.BigEndian.Uint64(v[8:]))
}

func main() {
	var (
		brokers = flag.String("brokers", envOr("EOSCTL_BROKERS", "127.0.0.1:9092"), "comma-separated seed brokers")
		app     = flag.String("app", "fraud", "application name: consumer group and transactional.id prefix")
		inst    = flag.String("instance", "0", "this instance's fixed id")
		input   = flag.String("input", "orders", "input topic")
		output  = flag.String("output", "orders-scored", "scored orders topic")
		alerts  = flag.String("alerts", "fraud-alerts", "alerts topic")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	w, err := pipeline.New(pipeline.Config{
		App: *app, Instance: *inst, Inputs: []string{*input}, Output: *output, Topology: "fraud",
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(strings.Split(*brokers, ",")...)},
		Logger:     log,
	}, Scorer{Alerts: *alerts})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fraud:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fraud:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
