package supervise

import (
	"strconv"
	"time"

	"github.com/eosctl/eos/fencing"
)

// Worker is the command line of one `eosctl run` worker process: the one
// place where the supervisors of workers (quickstart, the demos, chaos, the
// e2e tests, and package bench for its eos copiers) say which flags a
// supervised worker gets. Every worker it
// describes reports its lifecycle on stdout (--events -), for
// Config.OnEvent, and serves no metrics (--metrics-addr ""), since many run
// side by side.
type Worker struct {
	Topology string // default "passthrough"
	// Config is the topology's configuration file (--config), for the
	// topologies that take one (etl, aggregate); empty passes none, and
	// such a topology then refuses to start.
	Config         string
	Brokers        string
	App            string
	Instance       int
	Input, Output  string
	CommitInterval time.Duration // 0: the worker's default
	SessionTimeout time.Duration // 0: the worker's default
	LogLevel       string        // default "info"
	// AutoCommitInterval runs the worker with --commit-interval auto
	// instead of CommitInterval; OverheadBudget (a fraction, as
	// pipeline.Config has it) and MaxCommitInterval tune it, 0 meaning the
	// worker's defaults. They are ignored without it, as the worker would
	// ignore them.
	AutoCommitInterval bool
	OverheadBudget     float64
	MaxCommitInterval  time.Duration
	// NoIdempotencyKey leaves the eos-idempotency-key header off the
	// worker's output (--idempotency-key=false).
	NoIdempotencyKey bool
	// Extra flags, after the others (a later flag wins).
	Extra []string
}

// Name is "APP-INSTANCE", the worker's transactional.id and a good label
// for its process.
func (w Worker) Name() string { return fencing.ID(w.App, strconv.Itoa(w.Instance)) }

// Args returns the arguments of `eosctl` that start the worker.
func (w Worker) Args() []string {
	topology, level := w.Topology, w.LogLevel
	if topology == "" {
		topology = "passthrough"
	}
	if level == "" {
		level = "info"
	}
	args := []string{"run", topology, "--brokers", w.Brokers, "--app", w.App, "--instance", strconv.Itoa(w.Instance),
		"--input", w.Input, "--output", w.Output, "--events", "-", "--log-level", level, "--metrics-addr", ""}
	if w.Config != "" {
		args = append(args, "--config", w.Config)
	}
	switch {
	case w.AutoCommitInterval:
		args = append(args, "--commit-interval", "auto")
		if w.OverheadBudget > 0 {
			args = append(args, "--eos-overhead-budget", strconv.FormatFloat(w.OverheadBudget*100, 'g', -1, 64)+"%")
		}
		if w.MaxCommitInterval > 0 {
			args = append(args, "--max-commit-interval", w.MaxCommitInterval.String())
		}
	case w.CommitInterval > 0:
		args = append(args, "--commit-interval", w.CommitInterval.String())
	}
	if w.SessionTimeout > 0 {
		args = append(args, "--session-timeout", w.SessionTimeout.String())
	}
	if w.NoIdempotencyKey {
		args = append(args, "--idempotency-key=false")
	}
	return append(args, w.Extra...)
}
