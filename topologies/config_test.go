package topologies

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eosctl/eos"
)

func writeConfig(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every configuration mistake fails at start with FILE:LINE: KEY: REASON,
// wraps eos.ErrConfig, and names what would have been right.
func TestBadConfigsGiveFileLineAndReason(t *testing.T) {
	for _, tc := range []struct {
		name, topology, body string
		want                 string // after "FILE:"
	}{
		{"unknown key", "etl", "filter: amount > 1\nfiltr: x\n", `2: filtr: unknown key (did you mean "filter"? known: topology, join, filter, map, project, drop, key, route, outputs, format)`},
		{"not compiling", "etl", "map:\n  cents: amount *\n", `2: map.cents: expression "amount *" does not compile: unexpected token EOF (1:8)`},
		{"filter not boolean", "etl", "\nfilter: int(amount)\n", `2: filter: expression "int(amount)" must be boolean: expected bool, but got int`},
		{"filter string", "etl", "filter: '\"yes\"'\n", `1: filter: expression "\"yes\"" must be boolean`},
		{"unknown function", "etl", "key: lowr(user)\n", `1: key: expression "lowr(user)" calls unknown function lowr()`},
		{"map and project", "etl", "map: {a: b}\nproject: {c: d}\n", `2: project: use either map (add or replace fields) or project (exactly these fields), not both`},
		{"route without outputs", "etl", "route: '\"x\"'\n", `1: route: route chooses among the outputs, but no outputs are declared`},
		{"bad output topic", "etl", "outputs:\n  big: 'a topic'\n", `2: outputs.big: topic "a topic" has the character ' ' at byte 1`},
		{"wrong topology", "etl", "topology: aggregate\n", `1: topology: this file configures the aggregate topology, not etl`},
		{"another topology's keys", "aggregate", "topology: etl\nfilter: amount > 1\n", `1: topology: this file configures the etl topology, not aggregate`},
		{"another topology's keys without a topology key", "aggregate", "filter: amount > 1\n", `1: filter: unknown key (a key of the etl topology: is this file for etl? known: topology, group_by,`},
		{"aggregate keys in an etl file", "etl", "map: {a: b}\ngroup_by: user\n", `2: group_by: unknown key (a key of the aggregate topology: is this file for aggregate? known: topology, join, filter,`},
		{"not yaml", "etl", "filter: [unclosed\n", `not valid YAML`},
		{"empty", "etl", "", `1: the file is empty`},
		{"list at top", "etl", "- a\n", `1: the top level must be a mapping`},
		{"drop not a list", "etl", "drop: pad\n", `1: drop: want a list of field names`},
		{"missing group_by", "aggregate", "window: {size: 1m}\naggregations: {n: count()}\n", `1: group_by: missing: want an expression`},
		{"missing window", "aggregate", "group_by: user\naggregations: {n: count()}\n", `1: window: missing`},
		{"bad duration", "aggregate", "group_by: user\nwindow:\n  size: 1 minute\n", `3: window.size: want a positive duration such as 500ms, 1m or 1h30m, got "1 minute"`},
		{"advance too long", "aggregate", "group_by: user\nwindow: {size: 1m, advance: 2m}\naggregations: {n: count()}\n", `2: window.advance: advance 2m0s is longer than size 1m0s`},
		{"window key typo", "aggregate", "group_by: user\nwindow:\n  size: 1m\n  grcae: 5s\n", `4: window.grcae: unknown key (did you mean "grace"?`},
		{"bad aggregation", "aggregate", "group_by: user\nwindow: {size: 1m}\naggregations:\n  total: summ(amount)\n", `4: aggregations.total: want count(), sum(EXPR), min(EXPR), max(EXPR) or avg(EXPR), got "summ(amount)"`},
		{"sum without arg", "aggregate", "group_by: user\nwindow: {size: 1m}\naggregations:\n  total: sum()\n", `4: aggregations.total: sum() needs the expression to aggregate`},
		{"count with arg", "aggregate", "group_by: user\nwindow: {size: 1m}\naggregations:\n  n: count(amount)\n", `4: aggregations.n: count() takes no argument`},
		{"agg not compiling", "aggregate", "group_by: user\nwindow: {size: 1m}\naggregations:\n  total: sum(amount +)\n", `4: aggregations.total: expression "amount +" does not compile`},
		{"reserved name", "aggregate", "group_by: user\nwindow: {size: 1m}\naggregations:\n  end: count()\n", `4: aggregations.end: the name "end" is taken`},
		{"bad emit", "aggregate", "group_by: user\nwindow: {size: 1m}\naggregations: {n: count()}\nemit: often\n", `4: emit: want final (each window's result once, when it closes) or updates`},
		{"bad bool", "aggregate", "group_by: user\nwindow: {size: 1m}\naggregations: {n: count()}\nrepartition: maybe\n", `4: repartition: want true or false, got "maybe"`},
	} {
		t.Run(tc.name, func(t *testing.T) { requireConfigError(t, tc.topology, tc.body, tc.want) })
	}
	if _, err := NewETL(""); !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "a configuration file is required") {
		t.Fatalf("etl without --config: %v", err)
	}
	if _, err := NewETL(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
	wc, _ := Lookup("wordcount")
	if _, err := wc.New(Options{Config: "x.yaml"}); !errors.Is(err, eos.ErrConfig) {
		t.Fatalf("wordcount with a config: %v", err)
	}
}

// The sample configurations shipped in topologies/examples all load.
func TestExampleConfigsLoad(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configs: %v", err)
	}
	for _, f := range files {
		name, err := TopologyOf(f)
		if err != nil || name == "" {
			t.Fatalf("%s: topology key: %q, %v", f, name, err)
		}
		top, err := Lookup(name)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := top.New(Options{Config: f, CheckOnly: true}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// requireConfigError writes body as a config file of topology, and fails
// the test unless the topology refuses it with a one-line error that wraps
// eos.ErrConfig, starts with the file's path and contains want.
func requireConfigError(t *testing.T, topology, body, want string) {
	t.Helper()
	p := writeConfig(t, topology+".yaml", body)
	top, err := Lookup(topology)
	if err != nil {
		t.Fatal(err)
	}
	_, err = top.New(Options{Config: p})
	if err == nil {
		t.Fatalf("config %q was accepted", body)
	}
	if !errors.Is(err, eos.ErrConfig) {
		t.Fatalf("error %v does not wrap eos.ErrConfig", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, p+":") || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
		t.Fatalf("got  %q\nwant %q", msg, p+":"+want)
	}
}
