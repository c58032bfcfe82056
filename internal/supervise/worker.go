package supervise

import (
	"strconv"
	"time"
)

// Worker is the command line of one `eosctl run` worker process: the one
// place where the supervisors of workers (quickstart, the demos, chaos, the
// e2e tests) say which flags a supervised worker gets. Every worker it
// describes reports its lifecycle on stdout (--events -), for
// Config.OnEvent, and serves no metrics (--metrics-addr ""), since many run
// side by side.
type Worker struct {
	Topology       string // default "passthrough"
	Brokers        string
	App            string
	Instance       int
	Input, Output  string
	CommitInterval time.Duration // 0: the worker's default
	SessionTimeout time.Duration // 0: the worker's default
	LogLevel       string        // default "info"
	// Extra flags, after the others (a later flag wins).
	Extra []string
}

// Name is "APP-INSTANCE", the worker's transactional.id and a good label
// for its process.
func (w Worker) Name() string { return w.App + "-" + strconv.Itoa(w.Instance) }

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
	if w.CommitInterval > 0 {
		args = append(args, "--commit-interval", w.CommitInterval.String())
	}
	if w.SessionTimeout > 0 {
		args = append(args, "--session-timeout", w.SessionTimeout.String())
	}
	return append(args, w.Extra...)
}
