package main

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/eosctl/eos"
)

// settingFlags maps the library's setting names (eos.ConfigError.Setting,
// also quoted inside reasons) to the eosctl flags that set them, so that a
// configuration mistake reads in the terms the user typed.
var settingFlags = map[string]string{
	"pipeline.Config.App":                "--app",
	"pipeline.Config.Instance":           "--instance",
	"pipeline.Config.Inputs":             "--input",
	"pipeline.Config.Output":             "--output",
	"pipeline.Config.Outputs":            "--config (its outputs)",
	"pipeline.Config.DLQ":                "--dlq",
	"pipeline.Config.MaxTxnRecords":      "--max-txn-records",
	"pipeline.Config.Parallelism":        "--parallelism",
	"pipeline.Config.GroupProtocol":      "--group-protocol",
	"pipeline.Config.OverheadBudget":     "--eos-overhead-budget",
	"pipeline.Config.MaxCommitInterval":  "--max-commit-interval",
	"pipeline.Config.TransactionTimeout": "--transaction-timeout",
	"pipeline.Config.CommitInterval":     "--commit-interval",
	"pipeline.Config.SessionTimeout":     "--session-timeout",
	"pipeline.Config.InputWait":          "--input-wait",
	"datagen.Config.Topic":               "--topic",
	"datagen.Config.Count":               "--count",
	"datagen.Config.Size":                "--size",
	"datagen.Config.Partitions":          "--partitions",
	"datagen.Config.Rate":                "--rate",
	"datagen.Config.Keys":                "--keys",
	"broker.Config.Nodes":                "--nodes",
	"broker.Config.RTT":                  "--rtt",
	"broker.Config.Listen":               "--listen",
	"bench.Config.Records":               "--records",
	"bench.Config.NoIdempotencyKey":      "--eos-idempotency-key=false",
	"bench.Config.Partitions":            "--partitions",
	"bench.Config.Workers":               "--workers",
	"bench.Config.Repeat":                "--repeat",
	"bench.Config.RTT":                   "--rtt",
	"bench.Config.Brokers":               "--brokers or EOSCTL_BROKERS",
	"bench.Config.ClientOpts":            "--tls, --sasl-* (the connection flags)",
	"bench.Config.InProcess":             "--in-process",
	"bench.Config.OverheadBudget":        "--eos-overhead-budget",
	"bench.Config.MaxCommitInterval":     "--max-commit-interval",
	"bench.Config.Topology":              "--topology",
	"bench.Config.KeyHeader":             "--topology", // set from it: passthrough beside dedup
	"bench.Config.TableRows":             "--table-rows",
	"bench.Config.Modes":                 "--modes",
	"bench.Config.Intervals":             "--intervals",
	"bench.Config.Sizes":                 "--sizes",
	"bench.Config.Threads":               "--threads",
	"bench.Config.WarmupRecords":         "--warmup-records",
	"bench.Config.JVMHeap":               "--jvm-heap",
	"bench.Config.KStreamsStore":         "--kstreams-store",
	"bench.Config.LatencyRate":           "--latency-rate",
	"bench.Config.LatencyDuration":       "--latency-duration",
	"bench.Config.RunTimeout":            "--run-timeout",
	"bench.Config.StartTimeout":          "--timeout",
	"bench.Config.JSONPath":              "--json",
	"bench.Config.CSVPath":               "--csv",
	"bench.Config.ChartPaths":            "--chart",
	"bench.WriteWideTable":               "--wide",
	"topologies.Options.Config":          "--config",
	"topologies.Options.Output":          "--output",
	"SchemaRegistry.URL":                 "--schema-registry",
	"SchemaRegistry.CA":                  "--schema-registry-ca",
	"SchemaRegistry.Cert":                "--schema-registry-cert",
}

// inFlagTerms rewrites err's message for the command line: a
// configuration error's setting becomes the flag that sets it (or is
// dropped when no flag does), and setting names quoted in the text become
// flags too. Other errors keep their message.
func inFlagTerms(err error) string {
	msg := err.Error()
	var ce *eos.ConfigError
	if !errors.As(err, &ce) {
		return msg
	}
	said := "invalid configuration: " + ce.Reason
	if f, ok := settingFlags[ce.Setting]; ok {
		said = f + ": " + ce.Reason
	}
	return inFlagNames(strings.Replace(msg, ce.Error(), said, 1))
}

// inFlagNames replaces the library's setting names in text with the flags
// that set them: for errors, and for the reports the library writes (the
// bench table's advice).
func inFlagNames(text string) string {
	// Longest first: pipeline.Config.Outputs before pipeline.Config.Output.
	settings := slices.SortedFunc(maps.Keys(settingFlags), func(a, b string) int { return len(b) - len(a) })
	for _, s := range settings {
		text = strings.ReplaceAll(text, s, settingFlags[s])
	}
	return text
}
