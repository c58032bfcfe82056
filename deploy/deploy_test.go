// Package deploy holds the operations stack's configuration (Prometheus,
// Grafana provisioning and the dashboard) next to docker-compose.yml and
// the Dockerfile at the repository root. There is no Docker engine on the
// build machines, so these tests check what can be checked without one:
// the files parse, the compose stack is the one the README describes, with
// exactly-once-safe Kafka settings, Prometheus scrapes the ports the
// workers listen on, and every metric the dashboard queries is one the
// code registers.
package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/eosctl/eos/internal/kafkacluster"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/metrics"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
)

// compose is the part of docker-compose.yml the tests read.
type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     any               `yaml:"command"`
		Environment map[string]any    `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   any               `yaml:"depends_on"`
		Healthcheck map[string]any    `yaml:"healthcheck"`
		Labels      map[string]string `yaml:"labels"`
	} `yaml:"services"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	var c compose
	readYAML(t, "../docker-compose.yml", &c)
	return c
}

// args returns a service's command as a list.
func args(cmd any) []string {
	switch c := cmd.(type) {
	case []any:
		out := make([]string, len(c))
		for i, a := range c {
			out[i] = strings.TrimSpace(a.(string))
		}
		return out
	case string:
		return strings.Fields(c)
	}
	return nil
}

// flag returns the value after name in a command line.
func flag(cmd []string, name string) string {
	for i, a := range cmd {
		if a == name && i+1 < len(cmd) {
			return cmd[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func env(m map[string]any, key string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// hostPorts returns the host side of a service's published ports.
func hostPorts(ports []string) []string {
	var out []string
	for _, p := range ports {
		out = append(out, strings.SplitN(p, ":", 2)[0])
	}
	return out
}

// readmeOps returns the Operations section of docs/operations.md (the
// README links it).
func readmeOps(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Operations")
	if i < 0 {
		t.Fatal(`docs/operations.md has no "## Operations" section`)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	return s
}

// serviceRows returns the rows of the README's service table (the one whose
// header starts "| service |") by service name; a row may name several
// services ("`kafka-1`, `kafka-2`").
func serviceRows(t *testing.T, ops string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	in := false
	for _, line := range strings.Split(ops, "\n") {
		switch {
		case strings.HasPrefix(line, "| service |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in && strings.HasPrefix(line, "| `"):
			first := strings.SplitN(line[1:], "|", 2)[0]
			for _, name := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
				rows[name[1]] = line
			}
		}
	}
	if len(rows) == 0 {
		t.Fatal("the README's Operations section has no service table")
	}
	return rows
}

func TestComposeIsTheStackTheREADMEDescribes(t *testing.T) {
	c := loadCompose(t)
	want := []string{"kafka-1", "kafka-2", "kafka-3", "topics", "loadgen", "worker-0", "worker-1", "monitor", "prometheus", "grafana"}
	var got []string
	for name := range c.Services {
		got = append(got, name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("compose services %v, want %v", got, want)
	}
	ops := readmeOps(t)
	rows := serviceRows(t, ops)
	for name := range rows {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("the README's service table names %q, which docker-compose.yml does not have", name)
		}
	}
	for _, name := range want {
		row, ok := rows[name]
		if !ok {
			t.Errorf("the README's service table has no row for %s", name)
			continue
		}
		for _, p := range hostPorts(c.Services[name].Ports) {
			if !strings.Contains(row, p) {
				t.Errorf("service %s publishes host port %s, which its README row does not show: %s", name, p, row)
			}
		}
	}
	for _, target := range []string{"make up", "make down", "make dashboards", "http://localhost:3000", "http://localhost:9090"} {
		if !strings.Contains(ops, target) {
			t.Errorf("the README's Operations section does not mention %q", target)
		}
	}
}

func TestKafkaIsThreeKRaftNodesSafeForExactlyOnce(t *testing.T) {
	c := loadCompose(t)
	voters := ""
	ids := map[string]bool{}
	clusterID := ""
	for _, name := range []string{"kafka-1", "kafka-2", "kafka-3"} {
		s := c.Services[name]
		e := s.Environment
		if !strings.HasPrefix(s.Image, "apache/kafka:") {
			t.Errorf("%s runs %q, want the official apache/kafka image", name, s.Image)
		}
		if want := "apache/kafka:" + kafkacluster.DefaultVersion; s.Image != want {
			t.Errorf("%s runs %q, want %q, the version make kafka and the tests run", name, s.Image, want)
		}
		// The settings the launcher gives a 3-node cluster for
		// exactly-once (make kafka, the Apache Kafka test suite), so the
		// stack runs what the tests proved.
		wantEnv := map[string]string{
			"KAFKA_PROCESS_ROLES":             "broker,controller",
			"KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
		}
		for k, v := range kafkacluster.ExactlyOnceSettings(3) {
			wantEnv["KAFKA_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = v
		}
		for key, want := range wantEnv {
			if got := env(e, key); got != want {
				t.Errorf("%s: %s=%q, want %q", name, key, got, want)
			}
		}
		id := env(e, "KAFKA_NODE_ID")
		if id == "" || ids[id] {
			t.Errorf("%s: KAFKA_NODE_ID %q missing or not unique", name, id)
		}
		ids[id] = true
		if v := env(e, "KAFKA_CONTROLLER_QUORUM_VOTERS"); voters == "" {
			voters = v
		} else if v != voters {
			t.Errorf("%s: quorum voters %q differ from %q", name, v, voters)
		}
		if !strings.Contains(voters, id+"@"+name+":") {
			t.Errorf("%s (node %s) is not among the quorum voters %q", name, id, voters)
		}
		if v := env(e, "CLUSTER_ID"); clusterID == "" {
			clusterID = v
		} else if v != clusterID {
			t.Errorf("%s: CLUSTER_ID %q differs from %q", name, v, clusterID)
		}
		// Clients outside compose reach each node on the host port it
		// publishes, which it must advertise.
		adv := env(e, "KAFKA_ADVERTISED_LISTENERS")
		for _, p := range hostPorts(s.Ports) {
			if !strings.Contains(adv, "EXTERNAL://localhost:"+p) {
				t.Errorf("%s publishes port %s but advertises %q", name, p, adv)
			}
		}
		if !strings.Contains(adv, "INTERNAL://"+name+":19092") {
			t.Errorf("%s advertises %q, want INTERNAL://%s:19092 for the other containers", name, adv, name)
		}
	}
	topics := strings.Join(args(c.Services["topics"].Command), " ")
	if !strings.Contains(topics, "--replication-factor 3") || !strings.Contains(topics, "min.insync.replicas=2") {
		t.Errorf("the topics service does not create RF 3 / min ISR 2 topics: %s", topics)
	}
	for _, name := range []string{"loadgen", "worker-0", "worker-1", "monitor"} {
		if b := env(c.Services[name].Environment, "EOSCTL_BROKERS"); b != "kafka-1:19092,kafka-2:19092,kafka-3:19092" {
			t.Errorf("%s: EOSCTL_BROKERS=%q, want all three brokers' internal listeners", name, b)
		}
	}
}

// scrapeTargets returns the host:port each eosctl service serves metrics on,
// from its --metrics-addr.
func scrapeTargets(t *testing.T, c compose) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, s := range c.Services {
		cmd := args(s.Command)
		if len(cmd) == 0 || (cmd[0] != "run" && cmd[0] != "monitor") {
			continue
		}
		addr := flag(cmd, "--metrics-addr")
		host, port, ok := strings.Cut(addr, ":")
		if !ok || (host != "0.0.0.0" && host != "") {
			t.Errorf("%s serves metrics on %q; inside a container it must listen on 0.0.0.0", name, addr)
			continue
		}
		out[name] = name + ":" + port
		if !slices.ContainsFunc(s.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
			t.Errorf("%s listens on %s but does not publish it", name, port)
		}
	}
	return out
}

func TestPrometheusScrapesThePortsTheWorkersListenOn(t *testing.T) {
	c := loadCompose(t)
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			HonorLabels   bool   `yaml:"honor_labels"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "prometheus/prometheus.yml", &prom)
	scraped := map[string]bool{}
	for _, sc := range prom.ScrapeConfigs {
		if !sc.HonorLabels {
			t.Errorf("job %s: honor_labels must be true, or the instance label eos sets becomes exported_instance", sc.JobName)
		}
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				scraped[tg] = true
			}
		}
	}
	listening := scrapeTargets(t, c)
	if len(listening) != 3 {
		t.Errorf("want 2 workers and the monitor serving metrics, got %v", listening)
	}
	for name, addr := range listening {
		if !scraped[addr] {
			t.Errorf("%s serves metrics on %s, which Prometheus does not scrape (targets %v)", name, addr, scraped)
		}
		delete(scraped, addr)
	}
	for tg := range scraped {
		t.Errorf("Prometheus scrapes %s, where nothing in docker-compose.yml listens", tg)
	}
	// The alert rules load, and query only registered metrics.
	var cfg struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	readYAML(t, "prometheus/prometheus.yml", &cfg)
	if !slices.Equal(cfg.RuleFiles, []string{"alerts.yml"}) || !slices.Contains(c.Services["prometheus"].Volumes, "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro") {
		t.Errorf("prometheus does not load deploy/prometheus/alerts.yml (rule_files %v, volumes %v)", cfg.RuleFiles, c.Services["prometheus"].Volumes)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "prometheus/alerts.yml", &rules)
	reg := registered(t)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			for _, name := range regexp.MustCompile(`\beos_[a-z0-9_]+\b`).FindAllString(r.Expr, -1) {
				if !reg[name] {
					t.Errorf("alert %s queries %s, which the code does not register", r.Alert, name)
				}
			}
		}
	}
	if n == 0 {
		t.Error("alerts.yml has no rules")
	}
	// The mount is where the config is read from.
	if !slices.Contains(c.Services["prometheus"].Volumes, "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro") {
		t.Errorf("prometheus does not mount deploy/prometheus/prometheus.yml: %v", c.Services["prometheus"].Volumes)
	}
	// The workers of the sample topology: one app, distinct fixed instances.
	w0, w1 := args(c.Services["worker-0"].Command), args(c.Services["worker-1"].Command)
	if flag(w0, "--app") == "" || flag(w0, "--app") != flag(w1, "--app") || flag(w0, "--instance") == flag(w1, "--instance") {
		t.Errorf("workers must share --app and have distinct fixed --instance: %v / %v", w0, w1)
	}
}

// registered returns every metric name the code registers: the catalog's,
// and those a worker exporter serves once its client has talked to a
// broker (franz-go's kprom metrics have no series before that).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	add := func(name string, histogram bool) {
		out[name] = true
		if histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = true
			}
		}
	}
	for _, d := range metrics.Catalog() {
		add(d.Name, d.Kind == metrics.Histogram)
	}
	b, err := broker.Start(broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := metrics.NewWorker(metrics.WorkerConfig{App: "a", Instance: "0", Inputs: []string{"i"}, Output: "o"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), w.ClientHooks())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	fams, err := w.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		add(f.GetName(), f.GetType().String() == "HISTOGRAM")
	}
	return out
}

type dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestDashboardQueriesOnlyMetricsTheCodeRegisters(t *testing.T) {
	b, err := os.ReadFile("grafana/dashboards/eos.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("datasource provisioning: %+v", ds)
	}
	reg := registered(t)
	ident := regexp.MustCompile(`\beos_[a-z0-9_]+\b`)
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != ds.Datasources[0].UID {
			t.Errorf("panel %q uses datasource %q, not the provisioned %q", p.Title, p.Datasource.UID, ds.Datasources[0].UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range ident.FindAllString(tg.Expr, -1) {
				used[name] = true
				if !reg[name] {
					t.Errorf("panel %q queries %s, which the code does not register", p.Title, name)
				}
			}
		}
	}
	// What the issue asks the dashboard to show.
	for _, name := range []string{metrics.RecordsConsumed, metrics.RecordsProduced, metrics.Transactions, metrics.TransactionAborts,
		metrics.CommitDuration + "_bucket", metrics.LSOLag, metrics.ConsumerLag, metrics.HangingTxns, metrics.ProducerFenced} {
		if !used[name] {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
	// Grafana loads dashboards from where the provider points, which is
	// where compose mounts them.
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/provisioning/dashboards/eos.yml", &prov)
	c := loadCompose(t)
	if len(prov.Providers) != 1 || !slices.Contains(c.Services["grafana"].Volumes, "./deploy/grafana/dashboards:"+prov.Providers[0].Options.Path+":ro") {
		t.Errorf("the dashboard provider reads %+v, which grafana's volumes %v do not mount", prov.Providers, c.Services["grafana"].Volumes)
	}
	if d.UID != "eos" || !strings.Contains(readmeOps(t), "/d/"+d.UID) {
		t.Errorf("dashboard uid %q is not the one the README links", d.UID)
	}
}

func TestDockerfileIsMultiStageWithASmallFinalImage(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	for _, line := range strings.Split(string(b), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "FROM "); ok {
			froms = append(froms, f)
		}
	}
	if len(froms) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final one", len(froms))
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))
	if goVersion == nil || !strings.HasPrefix(froms[0], "golang:"+goVersion[1]) {
		t.Errorf("build stage %q does not use the Go of go.mod (%v)", froms[0], goVersion)
	}
	final := froms[len(froms)-1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage %q: want a static distroless or scratch image", final)
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/eosctl", "ENTRYPOINT"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	c := loadCompose(t)
	for _, name := range []string{"loadgen", "worker-0", "worker-1", "monitor"} {
		if c.Services[name].Build != "." {
			t.Errorf("%s is not built from the repository's Dockerfile (build: %v)", name, c.Services[name].Build)
		}
	}
}
