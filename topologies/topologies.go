// Package topologies holds the built-in topologies (passthrough, etl,
// aggregate, dedup, wordcount) and the registry that maps names to them, for
// programs that start a pipeline Worker by name, as eosctl run and package
// bench do.
package topologies

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/pipeline"
)

// Options are the settings a topology may read when it is built.
type Options struct {
	// Config is the path of a topology's configuration file, for the
	// topologies that take one.
	Config string
	// Warn, if set, receives what is valid in the configuration but likely
	// wrong, as "FILE:LINE: KEY: REASON" (an expression that compares a
	// field that may be absent, which fails on every record without it).
	Warn func(string)
	// Output is the worker's main output topic: a configuration with
	// format output: avro registers its schema under its subject.
	Output string
	// SchemaRegistry is where a configuration with a format key (avro)
	// finds its schemas.
	SchemaRegistry SchemaRegistry
	// CheckOnly builds the topology only to check its configuration: the
	// schema registry is not contacted.
	CheckOnly bool
}

// Topology describes a built-in topology.
type Topology struct {
	Name        string
	Description string
	// ConfigKeys lists the configuration keys the topology reads, for
	// `eosctl topology list`; empty for topologies without a config.
	ConfigKeys []string
	New        func(Options) (pipeline.Transform, error)
}

var registry = map[string]Topology{}

func register(t Topology) { registry[t.Name] = t }

// Lookup returns the topology called name, or an error listing the known
// ones.
func Lookup(name string) (Topology, error) {
	t, ok := registry[name]
	if !ok {
		return Topology{}, fmt.Errorf("unknown topology %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return t, nil
}

// All returns the built-in topologies sorted by name.
func All() []Topology {
	out := make([]Topology, 0, len(registry))
	for _, t := range registry {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the sorted names of the built-in topologies.
func Names() []string {
	var out []string
	for _, t := range All() {
		out = append(out, t.Name)
	}
	return out
}

func init() {
	register(Topology{
		Name:        "passthrough",
		Description: "copies every record unchanged (key, value, headers, timestamp)",
		New:         noConfig("passthrough", func() pipeline.Transform { return Passthrough{} }),
	})
	register(Topology{
		Name:        "etl",
		Description: "filters, reshapes, re-keys and routes JSON records as a YAML file says",
		ConfigKeys:  etlKeys[1:],
		New: func(o Options) (pipeline.Transform, error) {
			return withFormat(o, newETL)
		},
	})
	register(Topology{
		Name:        "aggregate",
		Description: "count/sum/min/max/avg of JSON records per group and event-time window, exactly-once state",
		ConfigKeys:  aggregateKeys[1:],
		New: func(o Options) (pipeline.Transform, error) {
			return withFormat(o, newAggregate)
		},
	})
	register(Topology{
		Name:        "dedup",
		Description: "lets each record through once per event id within a retention window, exactly-once state",
		ConfigKeys:  dedupKeys[1:],
		New: func(o Options) (pipeline.Transform, error) {
			return withFormat(o, newDedup)
		},
	})
	register(Topology{
		Name:        "wordcount",
		Description: "counts the words in record values with exactly-once state",
		New:         noConfig("wordcount", func() pipeline.Transform { return WordCount{} }),
	})
}

// noConfig builds a topology that takes no configuration file.
func noConfig(name string, mk func() pipeline.Transform) func(Options) (pipeline.Transform, error) {
	return func(o Options) (pipeline.Transform, error) {
		if o.Config != "" {
			return nil, eos.BadConfig("topologies.Options.Config", "the %s topology takes no configuration file", name)
		}
		return mk(), nil
	}
}

// Passthrough copies each record to the output unchanged.
type Passthrough struct{}

// Process implements pipeline.Transform.
func (Passthrough) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	out.Emit(pipeline.Output{Key: in.Key, Value: in.Value, Headers: in.Headers, Timestamp: in.Timestamp})
	return nil
}
