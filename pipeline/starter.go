package pipeline

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Starter is implemented by a Transform that reads a topic besides its
// inputs and must follow the worker's assignment: a table it joins records
// with (topologies.Table), materialised per assigned partition. The worker
// drives it:
//
//   - Start, once, when Run has checked its topics and before it joins the
//     group. An error stops Run; return an *eos.ConfigError (wrapped with
//     %w) for a layout no retry fixes, such as a table whose partition
//     count differs from the input's.
//   - Assigned and Revoked, from the group's assignment callbacks, with the
//     partitions of the (single) input topic. They run on the client's
//     goroutine, possibly while Process runs: they must only note the
//     change, quickly and safely for concurrent use. kgo fetches no record
//     of an assigned partition before Assigned returns.
//   - Sync, on the worker's goroutine, after every poll that returned
//     records and before any of them is processed: the place to apply
//     what Assigned and Revoked noted (read a newly assigned partition's
//     table to its end) and to catch up with the table's updates. An error
//     aborts the open transaction and reopens the session, as a failed
//     state restore does.
//   - Stop, once, when Run returns.
//
// What can go wrong: Sync is on the processing path, so whatever it waits
// for (a round trip to the table's leaders, a restore) delays every record
// of the poll; and it runs inside the open transaction, so a long restore
// counts against the transaction timeout.
type Starter interface {
	Start(ctx context.Context, env StartEnv) error
	Assigned(parts []int32)
	Revoked(parts []int32)
	Sync(ctx context.Context) error
	Stop()
}

// StartEnv is what a Starter gets from the worker at Start.
type StartEnv struct {
	// ClientOpts are the worker's client options (seed brokers, TLS,
	// SASL): a Starter makes its own clients with them.
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
	Inputs     []string
	// Stats are the worker's counters; a Starter that restores a table
	// adds the rows it read to Stats.Restored.
	Stats *Stats
	// Fetches counts the fetch responses the worker's client has read
	// (see FetchClock): read after a poll, it dates that poll's records.
	// Nil when the Starter runs outside a Worker.
	Fetches *FetchClock
}

// starter returns the Transform's Starter, or nil.
func (w *Worker) starter() Starter {
	s, _ := w.t.(Starter)
	return s
}

// startTransform starts the Transform's Starter, if it has one, and
// returns the function that stops it.
func (w *Worker) startTransform(ctx context.Context) (func(), error) {
	s := w.starter()
	if s == nil {
		return func() {}, nil
	}
	if err := s.Start(ctx, StartEnv{ClientOpts: w.cfg.ClientOpts, Logger: w.log, Inputs: w.cfg.Inputs, Stats: &w.stats, Fetches: &w.fetches}); err != nil {
		return nil, err
	}
	return s.Stop, nil
}

// assignedInput tells the Starter about the input partitions in ps.
func (w *Worker) assignedInput(ps map[string][]int32, assigned bool) {
	s := w.starter()
	if s == nil || len(w.cfg.Inputs) == 0 || len(ps[w.cfg.Inputs[0]]) == 0 {
		return
	}
	if assigned {
		s.Assigned(ps[w.cfg.Inputs[0]])
	} else {
		s.Revoked(ps[w.cfg.Inputs[0]])
	}
}

// syncTransform runs the Starter's Sync after a poll that returned records.
func (w *Worker) syncTransform(ctx context.Context, fs kgo.Fetches) error {
	s := w.starter()
	if s == nil || fs.NumRecords() == 0 {
		return nil
	}
	return s.Sync(ctx)
}
