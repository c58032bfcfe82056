package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/verify"
	"github.com/spf13/cobra"
)

// unknownGroupAfter is how long verify --wait-caught-up waits for a group
// nobody has joined before it says the group does not exist: long enough
// for workers started with verify (or just after it) to join.
const unknownGroupAfter = 10 * time.Second

func newVerifyCmd(g *globals) *cobra.Command {
	var cfg verify.Config
	var asJSON bool
	var group string
	cmd := &cobra.Command{
		Use:   "verify --input TOPIC --output TOPIC",
		Short: "Check with read_committed that every input record is in the output exactly once",
		Long: `Reads both topics from the beginning to their last stable offset with
isolation.level=read_committed, as a downstream consumer would, and compares
them by key (the decimal sequence numbers "eosctl produce" writes; a second
produce into the input continues the sequence, so its records are judged
like the first ones). Reports
the input and output counts, duplicates, missing keys, unexpected keys and
per-partition order violations (records of one input partition that appear
out of input order within an output partition).

Verify judges copies: the output of the passthrough topology over what
"eosctl produce" wrote. The etl, aggregate and wordcount topologies write
other records (filtered, reshaped, re-keyed, counted), which verify reports
as unexpected; read those with "eosctl consume", follow the workers with
"eosctl lag --group APP", and see "eosctl chaos --scenario aggregate", which
checks the aggregate topology's results against a reference.

Verify reads the output when it runs: while workers are still copying, it
reports their backlog as missing. --wait-caught-up APP first waits (up to
--timeout) until the consumer group APP has committed all of the input, as
"eosctl lag --group APP" showing 0 would tell, and no transaction is left
open on the output (on Apache Kafka a commit's markers reach the output a
moment after the group's offsets show it). A group that no worker has
joined within 10s and that has no committed offsets does not exist (a
mistyped --app): verify then says so and exits 2.

Exits 0 only when every input key is in the output exactly once and nothing
else is; 1 with the first offending keys otherwise.`,
		Example: `  eosctl verify --input in --output out
  eosctl verify --input in --output out --wait-caught-up copy
  eosctl verify --input in --output out --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext()
			defer stop()
			// verify's --timeout shadows the global one; connecting waits
			// the global default, or less if --timeout is shorter.
			vg := *g
			vg.timeout = min(g.timeout, cfg.Timeout)
			c, err := vg.connectAdmin(ctx)
			if err != nil {
				return err
			}
			// The output is checked after the wait: workers started just
			// before verify create it when they first commit.
			if _, err = admin.Partitions(ctx, c.cl, cfg.Input); err == nil && group != "" {
				fmt.Fprintf(os.Stderr, "waiting for group %s to catch up on %s (at most %s; %s if no worker joins the group)\n", group, cfg.Input, cfg.Timeout, unknownGroupAfter)
				err = committed.WaitCaughtUp(ctx, c.opts, committed.Wait{Group: group, Topics: []string{cfg.Input}, Outputs: []string{cfg.Output}, Within: cfg.Timeout,
					UnknownGroupAfter: unknownGroupAfter, UnknownGroup: func() {
						fmt.Fprintf(os.Stderr, "group %s does not exist (no worker has joined it, it has committed nothing): waiting %s for a worker to join it\n", group, unknownGroupAfter)
					}})
				if errors.Is(err, committed.ErrUnknownGroup) {
					err = usage(fmt.Errorf("%w: --wait-caught-up takes the consumer group of the workers, their --app (\"eosctl lag --group APP\" shows one); nothing was verified", err))
				}
				if ctx.Err() != nil {
					err = flagError{msg: fmt.Sprintf("interrupted while waiting for group %s to catch up on %s: nothing was verified", group, cfg.Input), err: ctx.Err()}
				}
			}
			if err == nil {
				_, err = admin.Partitions(ctx, c.cl, cfg.Output)
			}
			c.close()
			if err != nil {
				return err
			}
			cfg.Reading = func(in, out int64) {
				fmt.Fprintf(os.Stderr, "reading %d offsets of %s and %d of %s to their last stable offsets (at most %s)\n", in, cfg.Input, out, cfg.Output, cfg.Timeout)
			}
			rep, err := verify.Run(ctx, c.opts, cfg)
			if err != nil && ctx.Err() != nil {
				return flagError{msg: fmt.Sprintf("interrupted while reading %s and %s: nothing was verified", cfg.Input, cfg.Output), err: ctx.Err()}
			}
			if err != nil {
				return err
			}
			if asJSON {
				_ = printJSON(os.Stdout, rep)
			} else {
				fmt.Println(rep.Summary())
			}
			if !rep.OK() && rep.Unexpected > 0 {
				return fmt.Errorf("verify failed: %d output records have keys that are not input keys: verify judges copies of the records \"eosctl produce\" writes (the passthrough topology); etl, aggregate and wordcount write other records: read them with \"eosctl consume --topic %s\", follow the workers with \"eosctl lag --group APP\", and see \"eosctl chaos --scenario aggregate\" for a check of the aggregate's results", rep.Unexpected, cfg.Output)
			}
			if !rep.OK() {
				return verifyFailed{"verify failed"}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Input, "input", "", "input topic, as written by eosctl produce (required)")
	f.StringVar(&cfg.Output, "output", "", "output topic (required)")
	f.DurationVar(&cfg.Timeout, "timeout", time.Minute, "how long reading both topics to their end may take; connecting waits at most "+defaultTimeout.String()+", or this if shorter")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&group, "wait-caught-up", "", "first wait until this consumer group (the workers' --app) has committed all of the input and the output has no open transaction, up to --timeout")
	_ = cmd.MarkFlagRequired("input")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
