package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/eosctl/eos/inspect"
	"github.com/spf13/cobra"
)

func newLagCmd(g *globals) *cobra.Command {
	var (
		group    string
		topics   []string
		watch    bool
		interval time.Duration
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "lag --group GROUP [--topics T,...] [--watch]",
		Short: "Show a group's lag against the last stable offset, per partition",
		Long: `Prints, per partition of the topics the group has committed offsets for (or
of --topics), in the style of rpk group describe:

  COMMITTED  the group's committed offset ("-" if none)
  LSO        the last stable offset: read_committed consumers read up to it
  HWM        the high watermark
  LAG        LSO - COMMITTED (from the log start if nothing is committed):
             what the group can read and has not committed
  UNSTABLE   HWM - LSO: what nobody reading read_committed can see yet,
             because a transaction is open on the partition; large and
             not shrinking means a hanging transaction (eosctl txn hanging)
  MEMBER     the member the partition is assigned to

with totals. HWM-based tools (kafka-consumer-groups.sh, Burrow, most
exporters) report HWM - COMMITTED, which counts records a read_committed
group cannot read and so hides a stuck LSO. --watch repeats every
--interval until interrupted.

An error the cluster says is temporary (COORDINATOR_NOT_AVAILABLE while a
cluster that has just started creates __consumer_offsets, a leader moving)
is retried for up to --timeout; if it lasts, lag says what it means.`,
		Example: `  eosctl lag --group copy
  eosctl lag --group copy --topics in --watch --interval 1s
  eosctl lag --group copy --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return usage(fmt.Errorf("--interval must be positive, got %s", interval))
			}
			ctx, stop := signalContext()
			defer stop()
			c, err := g.connectAdmin(ctx)
			if err != nil {
				return err
			}
			defer c.close()
			out := cmd.OutOrStdout()
			clear := watch && !asJSON && isTerminal(os.Stdout)
			for first := true; ; first = false {
				// Retriable errors (a coordinator not available yet on a
				// cluster that just started) are retried within --timeout.
				lctx, cancel := context.WithTimeout(ctx, g.timeout)
				gl, err := inspect.Lag(lctx, c.adm, group, topics...)
				cancel()
				if err != nil {
					if !first && ctx.Err() != nil {
						return nil
					}
					if errors.Is(err, inspect.ErrNoCommits) {
						err = fmt.Errorf("%w with --topics", err)
					}
					return notFound(err)
				}
				switch {
				case asJSON && watch:
					_ = json.NewEncoder(out).Encode(gl)
				case asJSON:
					_ = printJSON(out, gl)
				default:
					if clear {
						fmt.Fprint(out, "\033[H\033[2J")
					} else if !first {
						fmt.Fprintln(out)
					}
					printLag(out, gl, watch)
				}
				if !watch {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "consumer group (for an eos worker: its --app) (required)")
	f.StringSliceVar(&topics, "topics", nil, "topics to measure (default: those the group has committed offsets for)")
	f.BoolVarP(&watch, "watch", "w", false, "repeat every --interval until interrupted")
	f.DurationVar(&interval, "interval", 2*time.Second, "time between --watch updates")
	f.BoolVar(&asJSON, "json", false, "print JSON (with --watch: one object per line)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func printLag(w io.Writer, gl *inspect.GroupLag, withTime bool) {
	hdr := newTable(w, "GROUP", gl.Group)
	state := orDash(gl.State)
	if gl.State != "" {
		state = fmt.Sprintf("%s (%d members)", gl.State, gl.Members)
	}
	hdr.row("STATE", state)
	hdr.row("TOTAL-LAG", gl.TotalLag)
	hdr.row("TOTAL-UNSTABLE", gl.TotalUnstable)
	if withTime {
		hdr.row("TIME", gl.At.Format(time.TimeOnly))
	}
	hdr.flush()
	fmt.Fprintln(w)
	t := newTable(w, "TOPIC", "PARTITION", "COMMITTED", "LSO", "HWM", "LAG", "UNSTABLE", "MEMBER")
	var committed, lso, hwm int64
	for _, p := range gl.Partitions {
		c := "-"
		if p.Committed >= 0 {
			c = fmt.Sprint(p.Committed)
			committed += p.Committed
		}
		lso += p.LSO
		hwm += p.HWM
		t.row(p.Topic, p.Partition, c, p.LSO, p.HWM, p.Lag, p.Unstable, orDash(p.Member))
	}
	t.row("TOTAL", "", committed, lso, hwm, gl.TotalLag, gl.TotalUnstable, "")
	t.flush()
}
