package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// No flag's help names two defaults: a flag whose usage text states its
// default must not have pflag append another "(default ...)".
func TestHelpNamesOneDefaultPerFlag(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			line := pflag.NewFlagSet("", pflag.ContinueOnError)
			line.AddFlag(f)
			if u := line.FlagUsages(); strings.Count(u, "(default") > 1 {
				t.Errorf("%s --%s: %s", c.CommandPath(), f.Name, strings.TrimSpace(u))
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}
