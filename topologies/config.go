package topologies

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"go.yaml.in/yaml/v3"
)

// ConfigError is a problem at a place in a configuration file. Its message
// is "FILE:LINE: KEY: REASON", the form editors and CI logs link to.
type ConfigError struct {
	File   string
	Line   int
	Key    string // dotted path of the offending key, e.g. "window.size"; may be empty
	Reason string
}

// Error is "FILE:LINE: KEY: REASON" (without KEY when it is empty).
func (e *ConfigError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Key, e.Reason)
}

// Unwrap makes every configuration error, positioned or not (a missing or
// unreadable file, YAML that does not parse, an unknown key, a bad value,
// an expression that does not compile), an *eos.ConfigError.
func (e *ConfigError) Unwrap() error {
	return &eos.ConfigError{Setting: "topologies.Options.Config", Reason: e.Error()}
}

// doc is a parsed configuration file: a YAML mapping, with positions.
type doc struct {
	file string
	root *yaml.Node
	warn func(string) // Options.Warn; nil drops warnings
}

// readDoc reads and parses path. The top level must be a mapping.
func readDoc(path string) (*doc, error) {
	if path == "" {
		return nil, eos.BadConfig("topologies.Options.Config", "a configuration file is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, eos.BadConfig("topologies.Options.Config", "reading it: %w", err)
	}
	return parseDoc(path, b)
}

func parseDoc(path string, b []byte) (*doc, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		// yaml.v3 says "yaml: line N: reason"; keep it as FILE:N: reason.
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 0
		if _, err := fmt.Sscanf(msg, "line %d:", &line); err == nil {
			msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
		}
		return nil, &ConfigError{File: path, Line: max(line, 1), Reason: "not valid YAML: " + msg}
	}
	d := &doc{file: path}
	if len(n.Content) == 0 {
		return nil, &ConfigError{File: path, Line: 1, Reason: "the file is empty"}
	}
	d.root = n.Content[0]
	if d.root.Kind != yaml.MappingNode {
		return nil, d.errAt(d.root, "", "the top level must be a mapping of keys to values")
	}
	return d, nil
}

func (d *doc) errAt(n *yaml.Node, key, format string, args ...any) error {
	return &ConfigError{File: d.file, Line: n.Line, Key: key, Reason: fmt.Sprintf(format, args...)}
}

// field is one key of a mapping and its value node.
type field struct {
	key   string // dotted path
	name  string
	value *yaml.Node
	line  *yaml.Node // the key's node, for positions
}

// fields returns the keys of mapping n (at path prefix) in file order,
// rejecting unknown and repeated keys.
func (d *doc) fields(n *yaml.Node, prefix string, known []string) ([]field, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, prefix, "want a mapping of keys to values, got %s", kindName(n))
	}
	var out []field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := join(prefix, k.Value)
		if known != nil && !slices.Contains(known, k.Value) {
			hint := ""
			if other := topologyWithKey(prefix, k.Value); other != "" {
				hint = fmt.Sprintf("a key of the %s topology: is this file for %s? ", other, other)
			} else if s := closest(k.Value, known); s != "" {
				hint = fmt.Sprintf("did you mean %q? ", s)
			}
			return nil, d.errAt(k, path, "unknown key (%sknown: %s)", hint, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return nil, d.errAt(k, path, "repeated key")
		}
		seen[k.Value] = true
		out = append(out, field{key: path, name: k.Value, value: v, line: k})
	}
	return out, nil
}

// topologyWithKey names the topology whose configuration has the
// top-level key name, for a file without a "topology:" key that configures
// another topology than the one it was given to ("filter" in an aggregate
// file is etl's); "" for nested keys and keys no topology has.
func topologyWithKey(prefix, name string) string {
	if prefix != "" {
		return ""
	}
	for _, t := range []struct {
		name string
		keys []string
	}{{"etl", etlKeys}, {"aggregate", aggregateKeys}, {"dedup", dedupKeys}} {
		if slices.Contains(t.keys, name) {
			return t.name
		}
	}
	return ""
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// str returns a scalar's text.
func (d *doc) str(f field) (string, error) {
	if f.value.Kind != yaml.ScalarNode || f.value.Tag == "!!null" {
		return "", d.errAt(f.value, f.key, "want a single value, got %s", kindName(f.value))
	}
	return f.value.Value, nil
}

// duration reads a duration: positive, or with zeroOK also zero.
func (d *doc) duration(f field, zeroOK bool) (time.Duration, error) {
	s, err := d.str(f)
	if err != nil {
		return 0, err
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil || v < 0 || v == 0 && !zeroOK:
		what := "a positive"
		if zeroOK {
			what = "a"
		}
		return 0, d.errAt(f.value, f.key, "want %s duration such as 500ms, 1m or 1h30m, got %q", what, s)
	}
	return v, nil
}

func (d *doc) boolean(f field) (bool, error) {
	var b bool
	if f.value.Kind != yaml.ScalarNode || f.value.Decode(&b) != nil {
		return false, d.errAt(f.value, f.key, "want true or false, got %q", f.value.Value)
	}
	return b, nil
}

func kindName(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Tag == "!!null":
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

// closest returns the known key within edit distance 2 of s, if any.
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// topologyKey checks the optional top-level "topology:" key against name.
// Call it before checking the keys: a file for another topology has keys
// this one does not know, and "this file configures the etl topology" says
// more than "filter: unknown key".
func (d *doc) topologyKey(name string) error {
	fs, err := d.fields(d.root, "", nil)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if f.name != "topology" {
			continue
		}
		s, err := d.str(f)
		if err != nil {
			return err
		}
		if s != name {
			return d.errAt(f.value, f.key, "this file configures the %s topology, not %s", s, name)
		}
	}
	return nil
}

// TopologyOf returns the value of the "topology:" key of the config file at
// path, or "" if it has none.
func TopologyOf(path string) (string, error) {
	d, err := readDoc(path)
	if err != nil {
		return "", err
	}
	fs, err := d.fields(d.root, "", nil)
	if err != nil {
		return "", err
	}
	for _, f := range fs {
		if f.name == "topology" {
			return d.str(f)
		}
	}
	return "", nil
}
