package pipeline

import (
	"maps"
	"slices"
	"strings"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
)

// Declaration is what a Transform needs from the worker beyond its inputs and
// default output. The worker creates every topic it names at start.
type Declaration struct {
	// Outputs are named outputs, name -> topic. A Transform emits to one
	// with Output.To. They add to Config.Outputs; a name in both must map
	// to the same topic.
	Outputs map[string]string
	// Stores names the Transform's keyed state stores. Each store is held
	// in memory, one map per partition of the state topic (the input, or
	// the repartition topic if there is one), and every change is written
	// to the compacted changelog topic "<app>-<store>-changelog" in the
	// same transaction as the outputs and the offset commit.
	Stores []string
	// Repartition, if set, names an internal topic
	// "<app>-<Repartition>-repartition" that the worker both produces to
	// (as the named output Repartition) and consumes. A Transform that
	// must group records by something other than their input partition
	// re-keys them to it; kgo's partitioner sends records with the same
	// key to the same partition, so state keyed by the new key lives in
	// one place. With a repartition topic, state belongs to its
	// partitions, not to the input's; Record.Repartitioned tells the two
	// kinds of record apart.
	Repartition string
	// DeadLetters says the Transform rejects bad records with DeadLetter,
	// so the worker creates the dead-letter topic at start, where a
	// missing permission shows at once. Without it the topic is created
	// when the first dead letter is written.
	DeadLetters bool
}

// Declarer is implemented by a Transform that has a Declaration.
type Declarer interface {
	Declare() Declaration
}

// layout is the resolved topic plan of a worker: every topic it consumes and
// produces, and where its state lives.
type layout struct {
	consume     []string          // inputs, plus the repartition topic
	outputs     map[string]string // named outputs, including the repartition topic
	repartition string            // the repartition topic, or ""
	stateTopic  string            // the topic whose partitions own the state, or ""
	stores      []string          // store names
	changelogs  []string          // changelog topic of each store
	deadLetters bool              // create the dead-letter topic at start
}

// resolveLayout merges cfg and the Transform's Declaration and validates
// every name. Errors are *eos.ConfigError.
func resolveLayout(cfg *Config, t Transform) (layout, error) {
	var d Declaration
	if dt, ok := t.(Declarer); ok {
		d = dt.Declare()
	}
	l := layout{consume: slices.Clone(cfg.Inputs), outputs: maps.Clone(cfg.Outputs), deadLetters: d.DeadLetters}
	if l.outputs == nil {
		l.outputs = map[string]string{}
	}
	for name, topic := range d.Outputs {
		if prev, ok := l.outputs[name]; ok && prev != topic {
			return l, eos.BadConfig("pipeline.Config.Outputs", "output %q is mapped to topic %q by the configuration and to %q by the topology", name, prev, topic)
		}
		l.outputs[name] = topic
	}
	if d.Repartition != "" {
		l.repartition = cfg.App + "-" + d.Repartition + "-repartition"
		if _, ok := l.outputs[d.Repartition]; ok {
			return l, eos.BadConfig("pipeline.Config.Outputs", "output name %q is taken by the repartition topic", d.Repartition)
		}
		l.outputs[d.Repartition] = l.repartition
		l.consume = append(l.consume, l.repartition)
	}
	if len(d.Stores) > 0 {
		switch {
		case l.repartition != "":
			l.stateTopic = l.repartition
		case len(cfg.Inputs) == 1:
			l.stateTopic = cfg.Inputs[0]
		default:
			// Partition i of two topics may go to two different
			// instances: state keyed by partition number would then
			// have two writers.
			return l, eos.BadConfig("pipeline.Config.Inputs", "a topology with state stores reads exactly one input topic (its state partition i is input partition i), got %d", len(cfg.Inputs))
		}
	}
	seenStore := map[string]bool{}
	for _, s := range d.Stores {
		if seenStore[s] {
			return l, eos.BadConfig("", "the Transform declares store %q twice", s)
		}
		seenStore[s] = true
		cl := cfg.App + "-" + s + "-changelog"
		if err := fencing.ValidateName("changelog topic", cl); err != nil {
			return l, eos.BadConfig("pipeline.Config.App", "store %q: %w", s, err)
		}
		l.stores = append(l.stores, s)
		l.changelogs = append(l.changelogs, cl)
	}
	return l, l.validate(cfg)
}

// validate checks that every topic name is valid and that no topic plays two
// roles: a worker reading its own output, or writing its changelog as an
// output, would corrupt it.
func (l layout) validate(cfg *Config) error {
	roles := map[string]string{}
	claim := func(topic, role string) error {
		if err := fencing.ValidateName("topic", topic); err != nil {
			return eos.BadConfig(settingOf(role), "%s: %w", role, err)
		}
		if prev, ok := roles[topic]; ok {
			return eos.BadConfig(settingOf(role), "topic %q is named twice: as %s and as %s", topic, prev, role)
		}
		roles[topic] = role
		return nil
	}
	for _, in := range cfg.Inputs {
		if err := claim(in, "pipeline.Config.Inputs"); err != nil {
			return err
		}
	}
	if err := claim(cfg.Output, "pipeline.Config.Output"); err != nil {
		return err
	}
	if err := claim(cfg.DLQ, "pipeline.Config.DLQ"); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(l.outputs)) {
		topic, role := l.outputs[name], "output "+name
		if topic == l.repartition {
			role = "repartition topic"
		}
		// Several names for one output topic are fine (an alias of the
		// default output, say); any other double role is not.
		if prev, ok := roles[topic]; ok && role != "repartition topic" && (prev == "pipeline.Config.Output" || strings.HasPrefix(prev, "output ")) {
			continue
		}
		if err := claim(topic, role); err != nil {
			return err
		}
	}
	for _, cl := range l.changelogs {
		if err := claim(cl, "changelog"); err != nil {
			return err
		}
	}
	return nil
}

// settingOf names the Config field behind a topic role of validate: the
// field itself, Outputs for a named output, and App for the topics whose
// names derive from it (repartition, changelog).
func settingOf(role string) string {
	switch {
	case strings.HasPrefix(role, "pipeline.Config."):
		return role
	case strings.HasPrefix(role, "output "):
		return "pipeline.Config.Outputs"
	}
	return "pipeline.Config.App"
}
