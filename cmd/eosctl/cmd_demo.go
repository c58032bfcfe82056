package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/demo"
	"github.com/eosctl/eos/pipeline"
	"github.com/spf13/cobra"
)

func newDemoCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Scripted demonstrations with real processes and real signals",
	}
	cmd.AddCommand(newDemoFencingCmd(g), newUnsafeWorkerCmd(g), newDemoSinkCmd(g))
	return cmd
}

func newDemoFencingCmd(g *globals) *cobra.Command {
	var cfg demo.Config
	var jsonFile string
	cmd := &cobra.Command{
		Use:   "fencing",
		Short: "Show a zombie worker being fenced by its replacement",
		Long: `Runs a narrated story with real worker processes on an embedded broker (or on
--brokers, with uniquely named topics), then verifies the output with
read_committed.

Scenarios (--scenario):
  zombie   instance A starts copying; it is frozen with SIGSTOP while its
           transaction is open with records already written (a GC pause, a
           network partition); instance B starts with the same --instance:
           InitProducerId bumps the epoch and the coordinator aborts A's
           transaction; B takes over; A is resumed with SIGCONT, its next
           request is rejected, and it exits with code 3 naming the
           transactional.id and both epochs. Every record arrives exactly once
           and A's half-written transaction is never visible to read_committed.
  unsafe   the same story with an idempotent, non-transactional copier that
           commits offsets after a flush: nothing fences A, and the duplicates
           it causes are counted and shown.
  restart  A is SIGKILLed mid-transaction and started again with the same id:
           the killed transaction is aborted, processing resumes from the
           committed offsets, no duplicates.

Prints a timeline: offset from the start, actor, producer id and epoch, event.
Exits 0 when the scenario showed what it is meant to show.`,
		Example: `  eosctl demo fencing
  eosctl demo fencing --scenario unsafe
  eosctl demo fencing --scenario restart --json timeline.json
  eosctl demo fencing --brokers kafka-1:9092`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			if brokersFrom(cmd) != "" {
				if cfg.Brokers, err = g.seeds(); err != nil {
					return err
				}
			}
			cfg.Out = os.Stdout
			ctx, stop := signalContext()
			defer stop()
			rep, err := demo.Fencing(ctx, cfg)
			if jsonFile != "" && rep != nil {
				if werr := writeJSON(jsonFile, rep); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				if strings.HasPrefix(err.Error(), "unknown scenario") {
					return usage(err)
				}
				return err
			}
			if !rep.OK {
				return verifyFailed{"demo fencing: " + rep.Verdict}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Scenario, "scenario", demo.ScenarioZombie, "zombie, unsafe or restart")
	f.Int64Var(&cfg.Records, "records", 20_000, "input records")
	f.IntVar(&cfg.Rate, "rate", 4_000, "input records per second")
	f.StringVar(&jsonFile, "json", "", "also write the timeline and verdict as JSON to this file")
	return cmd
}

// newUnsafeWorkerCmd is the demo's counter-example worker. It is hidden:
// nobody should run it for real.
func newUnsafeWorkerCmd(g *globals) *cobra.Command {
	var cfg demo.UnsafeConfig
	var events string
	var sessionTimeout time.Duration
	cmd := &cobra.Command{
		Use:    "unsafe-worker",
		Short:  "At-least-once copier used by the fencing demo (not exactly-once)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.ClientOpts, err = g.clientOpts(); err != nil {
				return err
			}
			if events == "-" {
				cfg.OnEvent = pipeline.JSONEvents(os.Stdout)
			}
			ctx, stop := signalContext()
			defer stop()
			return demo.UnsafeCopy(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.App, "app", "", "application name")
	f.StringVar(&cfg.Instance, "instance", "", "instance id")
	f.StringVar(&cfg.Input, "input", "", "input topic")
	f.StringVar(&cfg.Output, "output", "", "output topic")
	f.DurationVar(&cfg.CommitInterval, "commit-interval", time.Second, "offset commit interval")
	f.DurationVar(&sessionTimeout, "session-timeout", 6*time.Second, "ignored; accepted for symmetry with run")
	f.StringVar(&events, "events", "", `"-" writes events to stdout`)
	f.String("metrics-addr", "", "ignored: the unsafe copier serves no metrics")
	return cmd
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func newDemoSinkCmd(g *globals) *cobra.Command {
	var cfg demo.SinkConfig
	var jsonFile string
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Show a naive database sink duplicating rows where eosctl sink does not, and reconcile catching the rest",
		Long: `Needs nothing installed: an embedded broker and an SQLite file (pure Go).

1. A naive at-least-once sink (one INSERT per record, offsets committed to
   Kafka after the rows) copies the topic into a table while it is SIGKILLed
   --kills times, then replays the topic from offset 0: its table shows the
   duplicate rows.
2. eosctl sink (rows and offsets in one transaction, INSERT ... ON CONFLICT
   DO NOTHING) goes through the same kills and replay: no duplicate row.
3. A row is deleted and another planted in eosctl sink's table behind its
   back; eosctl reconcile finds both, repairs the missing one, and reports
   the planted one without deleting it.

Exits 0 when it showed all three.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg.Logger, cfg.Out = log, os.Stdout
			ctx, stop := signalContext()
			defer stop()
			rep, err := demo.Sink(ctx, cfg)
			if jsonFile != "" && rep != nil {
				if werr := writeJSON(jsonFile, rep); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return err
			}
			if !rep.OK {
				return verifyFailed{"demo sink: " + rep.Verdict}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&cfg.Records, "records", 20_000, "input records")
	f.IntVar(&cfg.Kills, "kills", 4, "SIGKILLs of each sink")
	f.StringVar(&jsonFile, "json", "", "also write the numbers and the verdict as JSON to this file")
	return cmd
}
