package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/bench"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// intervalFlag is --commit-interval: a positive duration, or "auto" for the
// adaptive interval (pipeline.Config.AutoInterval). Unset, it is 0, which the
// worker takes as its default.
type intervalFlag struct {
	d    *time.Duration
	auto *bool
}

func (f intervalFlag) String() string {
	switch {
	case f.auto != nil && *f.auto:
		return "auto"
	case f.d == nil || *f.d == 0:
		return ""
	}
	return f.d.String()
}

func (f intervalFlag) Set(s string) error {
	iv, err := bench.ParseInterval(s)
	if err != nil {
		return err
	}
	*f.auto, *f.d = iv.Auto, iv.Fixed
	return nil
}

func (intervalFlag) Type() string { return "duration|auto" }

// percentFlag is a share given in percent, "3" or "3%", stored as a
// fraction (0.03).
type percentFlag struct{ v *float64 }

// String is empty for zero, the "not set" value, so that help prints only
// the default the usage text names (pflag prints any other value as a
// second default).
func (f percentFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.FormatFloat(*f.v*100, 'g', -1, 64) + "%"
}

func (f percentFlag) Set(s string) error {
	n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil {
		return fmt.Errorf("want a percentage such as 3 or 3%%")
	}
	if n <= 0 || n > 50 {
		return fmt.Errorf("must be more than 0%% and at most 50%%")
	}
	*f.v = n / 100
	return nil
}

func (percentFlag) Type() string { return "percent" }

// autoIntervalFlags adds --commit-interval (duration or auto),
// --eos-overhead-budget and --max-commit-interval to fs.
func autoIntervalFlags(fs *pflag.FlagSet, interval *time.Duration, auto *bool, budget *float64, maxInterval *time.Duration, intervalUsage string) {
	fs.Var(intervalFlag{d: interval, auto: auto}, "commit-interval", intervalUsage)
	fs.Var(percentFlag{v: budget}, "eos-overhead-budget", "with --commit-interval auto: the share of wall time commits may take, in percent (default 3%)")
	fs.DurationVar(maxInterval, "max-commit-interval", 0, "with --commit-interval auto: the longest interval it may choose (default 5s)")
}

// checkAutoFlags rejects the auto-only flags without --commit-interval auto.
func checkAutoFlags(cmd *cobra.Command, auto bool) error {
	if auto {
		return nil
	}
	for _, name := range []string{"eos-overhead-budget", "max-commit-interval"} {
		if cmd.Flags().Changed(name) {
			return usage(fmt.Errorf("--%s only applies with --commit-interval auto", name))
		}
	}
	return nil
}
