package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eosctl/eos/metrics"
	"github.com/eosctl/eos/reconcile"
	"github.com/eosctl/eos/sink"
	"github.com/spf13/cobra"
)

func newReconcileCmd(g *globals) *cobra.Command {
	var (
		cfg         reconcile.Config
		mappingFile string
		from        int64
		asJSON      bool
		watch       time.Duration
		metricsAddr string
	)
	cmd := &cobra.Command{
		Use:   "reconcile --to DSN --mapping FILE --input TOPIC --group GROUP",
		Short: "Compare a topic with the table eosctl sink writes it to, key by key",
		Long: `Judges the topic up to where the sink (--group, its consumer group) has
committed: the next offsets in the sink's offsets table (eos_sink_offsets),
read in the same database snapshot as the table. Records beyond them, up to
the topic's last stable offset, are "pending": counted, never reported
missing, never repaired. Each record is mapped as "eosctl sink" would (the
same mapping file) and the row is compared with the record the sink keeps:
the first of a key in insert mode, the last in upsert mode.

  missing  a key of a judged record with no row
  changed  a row whose mapped columns differ from that record's
  extra    a row no judged record asks for (checked only on runs that read
           every partition from offset 0: --from 0, or the first run)
  pending  offsets beyond the sink's committed position (not judged yet)

It never changes the table unless --repair is given, and even then only
re-sends the missing records through the sink's idempotent write (INSERT ...
ON CONFLICT (key) DO NOTHING), so repairing twice is safe; extra and changed rows
are reported, never deleted or overwritten. Each run stores its watermark
(table eos_reconcile_state) and the next run continues from it; --from N
reruns from offset N instead, with the same result when nothing changed.
Findings also go to the table eos_reconcile_report (at most --max-findings
of each kind are listed; all are counted).

Memory stays bounded whatever the topic's size (193 MiB measured at 10M
records): records are spilled to temporary files (--temp-dir, about the
size of the records read) in buckets by key, judged one bucket at a time,
and looked up through the key column's index.

This is the check for what no transaction catches: rows deleted or edited
in the database, a record that never became a row.

--watch INTERVAL runs it every INTERVAL and, with --metrics-addr, exports
eos_reconcile_last_success_timestamp_seconds (alert when it stops moving),
eos_reconcile_discrepancies{kind} and eos_reconcile_runs_total{result}.

Exit codes: 0 clean; 5 discrepancies found (the report says which); 1 the
run failed; 2 bad input (also: no offsets of --group for the topic); 4
authorization failure.`,
		Example: `  eosctl reconcile --to "$DSN" --mapping payments.yaml --input payments --group payments-sink
  eosctl reconcile --to "$DSN" --mapping payments.yaml --input payments --group payments-sink --from 0 --json
  eosctl reconcile --to "$DSN" --mapping payments.yaml --input payments --group payments-sink --repair
  eosctl reconcile --to "$DSN" --mapping payments.yaml --input payments --group payments-sink --watch 5m --metrics-addr 127.0.0.1:9468`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.DSN == "" { // not a flag default: help would print the password
				cfg.DSN = os.Getenv("EOSCTL_SINK_DSN")
			}
			if cfg.DSN == "" {
				return usage(fmt.Errorf("--to (or EOSCTL_SINK_DSN) is required"))
			}
			if cfg.Mapping, err = sink.LoadMapping(mappingFile); err != nil {
				return sinkErr(err)
			}
			if cmd.Flags().Changed("from") {
				if from < 0 {
					return usage(fmt.Errorf("--from must not be negative, got %d", from))
				}
				cfg.From = &from
			}
			if cfg.Logger, err = g.logger(); err != nil {
				return err
			}
			if cfg.ClientOpts, err = g.clientOpts(); err != nil {
				return err
			}
			cfg.StartTimeout = g.timeout
			if watch < 0 {
				return usage(fmt.Errorf("--watch must not be negative, got %s", watch))
			}
			print := func(rep *reconcile.Report) {
				if asJSON {
					_ = printJSON(os.Stdout, rep)
					return
				}
				fmt.Println(rep.Summary())
				for _, fs := range [][]reconcile.Finding{rep.Missing, rep.Changed, rep.Extra} {
					for _, f := range fs {
						if f.Kind == "changed" {
							fmt.Printf("  changed  key %s (%s[%d]@%d) column %s: topic %q, table %q\n", f.Key, rep.Topic, f.Partition, f.Offset, f.Column, f.Topic, f.Table)
						} else if f.Kind == "missing" {
							fmt.Printf("  missing  key %s (%s[%d]@%d)\n", f.Key, rep.Topic, f.Partition, f.Offset)
						} else {
							fmt.Printf("  extra    key %s\n", f.Key)
						}
					}
				}
			}
			ctx, stop := signalContext()
			defer stop()
			if watch == 0 {
				rep, err := reconcile.Run(ctx, cfg)
				if err != nil {
					return reconcileErr(err)
				}
				print(rep)
				if !rep.Clean() {
					return discrepancies{fmt.Sprintf("reconcile: %d missing, %d changed, %d extra", rep.MissingCount, rep.ChangedCount, rep.ExtraCount)}
				}
				return nil
			}
			name := cfg.Name
			if name == "" {
				name = cfg.Mapping.Table + "/" + cfg.Topic
			}
			m := reconcile.NewMetrics(name)
			if metricsAddr != "" {
				srv, err := metrics.Listen(metricsAddr, m.Handler())
				if err != nil {
					return usage(fmt.Errorf("--metrics-addr: %w", err))
				}
				defer srv.Close()
			}
			reconcile.Watch(ctx, cfg, watch, m, func(rep *reconcile.Report, err error) {
				if err != nil {
					cfg.Logger.Error("reconcile run failed; retrying at the next interval", "error", reconcileErr(err))
					return
				}
				print(rep)
			})
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DSN, "to", "", "the sink's database, as for eosctl sink (env EOSCTL_SINK_DSN)")
	f.StringVar(&mappingFile, "mapping", "", "the sink's mapping file (required)")
	f.StringVar(&cfg.Topic, "input", "", "the topic the sink reads (required)")
	f.StringVar(&cfg.Group, "group", "", "the sink's consumer group: its committed offsets bound what is judged (required)")
	f.StringVar(&cfg.OffsetsTable, "offsets-table", "eos_sink_offsets", "the sink's offsets table")
	f.IntVar(&cfg.MaxFindings, "max-findings", 10000, "findings of each kind listed in the report (all are counted)")
	f.StringVar(&cfg.TempDir, "temp-dir", "", "directory for the run's spill files (default: the system's temp directory)")
	f.StringVar(&cfg.Name, "name", "", "name of this reconciliation, keying its stored watermark and report (default TABLE/TOPIC)")
	f.Int64Var(&from, "from", 0, "rerun from this offset on every partition instead of the stored watermark (0: everything, extras checked)")
	f.BoolVar(&cfg.Repair, "repair", false, "re-send the missing records through the sink's idempotent write (safe to run twice)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.DurationVar(&watch, "watch", 0, "run every INTERVAL until SIGINT/SIGTERM, continuing from the watermark (0: run once)")
	f.StringVar(&metricsAddr, "metrics-addr", "", `with --watch, serve Prometheus /metrics (eos_reconcile_*) on this host:port`)
	_ = cmd.MarkFlagRequired("mapping")
	_ = cmd.MarkFlagRequired("input")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

// reconcileTerms maps reconcile.Config's own field names to this command's
// flags (the sink's, which its errors also use, are sinkErr's).
var reconcileTerms = strings.NewReplacer("Config.TempDir", "--temp-dir", "MaxFindings", "--max-findings")

// reconcileErr speaks in flags, keeping what errors.Is needs for the exit
// code.
func reconcileErr(err error) error {
	if err = sinkErr(err); err == nil {
		return nil
	}
	return flagError{msg: reconcileTerms.Replace(err.Error()), err: err}
}

// discrepancies is returned when reconcile ran and found differences; the
// report has been printed.
type discrepancies struct{ msg string }

func (e discrepancies) Error() string        { return e.msg }
func (e discrepancies) Is(target error) bool { return target == errDiscrepancies }

// errDiscrepancies is matched by every discrepancies error.
var errDiscrepancies = errors.New("discrepancies found")
