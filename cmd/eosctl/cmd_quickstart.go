package main

import (
	"fmt"
	"os"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/quickstart"
	"github.com/spf13/cobra"
)

func newQuickstartCmd(g *globals) *cobra.Command {
	var cfg quickstart.Config
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Run the whole exactly-once story on an embedded broker, with crashes",
		Long: `Starts an embedded broker in a temporary directory, produces 1,000,000 records,
runs two passthrough worker processes, SIGKILLs one of them while its
transaction is open (twice) and restarts it with the same instance id, waits
for the output to catch up, and verifies with read_committed that every input
record is in the output exactly once. Exits 0 only if verify passes.

Needs no Kafka and no flags; --brokers is ignored (the broker is embedded).`,
		Example: `  go run ./cmd/eosctl quickstart
  eosctl quickstart --records 200000 --kills 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if cfg.Records < 1 || cfg.Workers < 1 || cfg.Size < 1 {
				return usage(fmt.Errorf("--records, --workers and --size must be positive, got %d, %d and %d", cfg.Records, cfg.Workers, cfg.Size))
			}
			if cfg.Kills < 0 || cfg.CommitInterval <= 0 {
				return usage(fmt.Errorf("--kills must not be negative and --commit-interval must be positive, got %d and %s", cfg.Kills, cfg.CommitInterval))
			}
			if cfg.Kills == 0 {
				cfg.Kills = -1 // quickstart.Config: 0 is the default, negative none
			}
			cfg.Logger = log
			if cmd.Flags().Changed("log-level") {
				cfg.WorkerLogLevel = g.logLevel
			}
			if !asJSON {
				cfg.Out = os.Stdout
			}
			ctx, stop := signalContext()
			defer stop()
			sum, err := quickstart.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				_ = printJSON(os.Stdout, sum)
			} else {
				printQuickstart(sum)
			}
			if !sum.Verify.OK() {
				return verifyFailed{"quickstart: verify failed"}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&cfg.Records, "records", 1_000_000, "records to produce and copy")
	f.IntVar(&cfg.Size, "size", 100, "record value size in bytes")
	f.IntVar(&cfg.Workers, "workers", 2, "worker processes")
	f.IntVar(&cfg.Kills, "kills", 2, "times to SIGKILL a worker mid-transaction")
	f.DurationVar(&cfg.CommitInterval, "commit-interval", 100*time.Millisecond, "transaction commit interval")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON instead of text")
	return cmd
}

func printQuickstart(s *quickstart.Summary) {
	v := s.Verify
	verdict := "PASS: every input record is in the output exactly once"
	if !v.OK() {
		verdict = "FAIL"
	}
	fmt.Printf(`
records          %d
copy             %.1fs (%.0f records/s, with %d worker kills, %d of them mid-transaction)
transactions     %d committed, %d aborted
verify           input %d, output %d, duplicates %d, missing %d, unexpected %d, order violations %d
%s (%.1fs in all)
`, s.Records, s.CopySeconds, s.RecordsPerSec, s.Kills, s.KilledMidTxn, s.Committed, s.Aborted,
		v.InputRecords, v.OutputRecords, v.Duplicates, v.Missing, v.Unexpected, v.OrderViolations, verdict, s.TotalSeconds)
	if !v.OK() {
		fmt.Println(v.Summary())
	}
}
