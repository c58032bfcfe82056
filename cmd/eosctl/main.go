// Command eosctl runs Kafka-to-Kafka topologies with exactly-once semantics,
// and the tools around them: an embedded broker, a data generator, a
// verifier, benchmarks and demos. This package only wires flags to the
// library packages; the behaviour lives there.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(execute(newRoot(), os.Args[1:]))
}

// execute runs the command line and returns the process exit code. Any error
// raised before a command's own RunE starts (an unknown command or flag, a
// missing required flag, wrong arguments) is a usage error.
func execute(root *cobra.Command, args []string) int {
	started := false
	var wrap func(*cobra.Command)
	wrap = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				started = true
				return run(cmd, args)
			}
		}
		for _, sub := range c.Commands() {
			wrap(sub)
		}
	}
	wrap(root)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	if !started {
		err = usage(err)
	}
	if _, quiet := err.(verifyFailed); !quiet {
		msg := oneLine(errors.New(inFlagTerms(err)))
		if msg == context.Canceled.Error() {
			msg = "interrupted"
		} else if errors.Is(err, context.Canceled) {
			// "quickstart interrupted while verifying: context canceled":
			// the line already says it was interrupted.
			msg = strings.TrimSuffix(msg, ": "+context.Canceled.Error())
		}
		fmt.Fprintln(os.Stderr, "eosctl: "+msg)
	}
	return exitCode(err)
}
