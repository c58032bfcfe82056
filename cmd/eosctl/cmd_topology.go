package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/eosctl/eos/topologies"
	"github.com/spf13/cobra"
)

func newTopologyCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "List the built-in topologies and check their configuration files",
		Long: `The built-in topologies are what "eosctl run TOPOLOGY" runs. Some take a YAML
configuration file (--config): "topology list" shows which keys each one
reads, "topology check" validates a file without connecting to anything, with
the same errors "eosctl run" would stop on (FILE:LINE: KEY: REASON, exit 2).
Sample configurations are in topologies/examples/.`,
		Example: `  eosctl topology list
  eosctl topology check --config topologies/examples/etl-big-orders.yaml
  eosctl topology check aggregate --config spend.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTopologyListCmd(), newTopologyCheckCmd())
	return cmd
}

func newTopologyListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the built-in topologies: name, what it does, configuration keys",
		Example: `  eosctl topology list
  eosctl topology list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listTopologies(cmd.OutOrStdout(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {name, description, config_keys}")
	return cmd
}

func listTopologies(w io.Writer, asJSON bool) error {
	all := topologies.All()
	if asJSON {
		type entry struct {
			Name        string   `json:"name"`
			Description string   `json:"description"`
			ConfigKeys  []string `json:"config_keys"`
		}
		out := []entry{}
		for _, t := range all {
			out = append(out, entry{t.Name, t.Description, append([]string{}, t.ConfigKeys...)})
		}
		return printJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDESCRIPTION\tCONFIG KEYS (--config)")
	for _, t := range all {
		keys := "-"
		if len(t.ConfigKeys) > 0 {
			keys = strings.Join(t.ConfigKeys, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Description, keys)
	}
	return tw.Flush()
}

func newTopologyCheckCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "check [TOPOLOGY] --config FILE",
		Short: "Validate a topology configuration file without running anything",
		Long: `Loads FILE as "eosctl run TOPOLOGY --config FILE" would: parses the YAML,
rejects unknown keys, compiles every expression once and checks that the
ones that must be boolean are. It connects to nothing. TOPOLOGY may be
omitted when the file names it with a "topology:" key, as the samples in
topologies/examples/ do.

Exit code 0 and "FILE: ok (TOPOLOGY)" if the file is valid; 2 and
"FILE:LINE: KEY: REASON" if not. What is valid but likely wrong is a
"warning: FILE:LINE: KEY: REASON" line on stderr, with exit code 0: an
ordering comparison with $env.FIELD, nil when the field is absent, fails
on every record without it; write ($env.FIELD ?? 0) instead.`,
		Example: `  eosctl topology check --config topologies/examples/aggregate-user-minute.yaml
  eosctl topology check etl --config etl.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if config == "" {
				return usage(fmt.Errorf("--config FILE is required"))
			}
			name, err := topologies.TopologyOf(config)
			if err != nil {
				return usage(err)
			}
			if len(args) == 1 {
				if name != "" && name != args[0] {
					return usage(fmt.Errorf("%s configures the %s topology, not %s", config, name, args[0]))
				}
				name = args[0]
			}
			if name == "" {
				return usage(fmt.Errorf("%s does not say which topology it configures: name it (eosctl topology check etl --config %s) or add a line \"topology: etl\"", config, config))
			}
			t, err := topologies.Lookup(name)
			if err != nil {
				return usage(err)
			}
			if len(t.ConfigKeys) == 0 {
				return usage(fmt.Errorf("the %s topology takes no configuration file", t.Name))
			}
			warn := func(w string) { fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w) }
			if _, err := t.New(topologies.Options{Config: config, Warn: warn, CheckOnly: true}); err != nil {
				return usage(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s)\n", config, t.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the configuration file to check (required)")
	return cmd
}
