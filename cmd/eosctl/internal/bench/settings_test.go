package bench

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/pipeline"
)

// A Go copier runs at the cell's thread count: the GOMAXPROCS its process
// sees is the job's, even when this process's environment sets another.
func TestGoCopiersRunAtTheCellsThreads(t *testing.T) {
	t.Setenv("GOMAXPROCS", "7")
	for _, n := range []int{1, 2} {
		var out string
		p, err := supervise.Start(t.Context(), supervise.Config{Name: "copier", Bin: "sh", Args: []string{"-c", `echo "$GOMAXPROCS"`},
			Env: copierEnv(&Config{}, copyJob{threads: n}), OnLine: func(line []byte) { out = string(line) }})
		if err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(); code != 0 || out != strconv.Itoa(n) {
			t.Errorf("threads %d: the copier exited %d and sees GOMAXPROCS=%q", n, code, out)
		}
	}
}

// The settings handed to a matched JVM peer are eos's, in Java's names, and
// the peer's report of them reads back as the same settings.
func TestJVMClientConfigCarriesEOSSettings(t *testing.T) {
	s, err := pipeline.WorkerClientSettings()
	if err != nil {
		t.Fatal(err)
	}
	cc := jvmClientConfig(s)
	got := map[string]map[string]string{"producer": {}, "consumer": {}}
	for _, kv := range strings.Split(cc, ",") {
		k, v, _ := strings.Cut(kv, "=")
		prefix, key, _ := strings.Cut(k, ".")
		got[prefix][key] = v
	}
	for k, want := range map[string]string{"compression.type": "snappy", "batch.size": "1000012", "linger.ms": "10", "acks": "all",
		"max.in.flight.requests.per.connection": "5", "enable.idempotence": "true"} {
		if got["producer"][k] != want {
			t.Errorf("producer.%s=%q, want %q (%s)", k, got["producer"][k], want, cc)
		}
	}
	for k, want := range map[string]string{"max.partition.fetch.bytes": "262144", "fetch.max.bytes": "8388608"} {
		if got["consumer"][k] != want {
			t.Errorf("consumer.%s=%q, want %q (%s)", k, got["consumer"][k], want, cc)
		}
	}
	if back := peerSettings(got["producer"], got["consumer"]); back != s {
		t.Errorf("read back as %+v, want %+v", back, s)
	}
}

// --threads takes a list of positive counts, each once.
func TestParseThreads(t *testing.T) {
	if got, err := ParseThreads("1, 2"); err != nil || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("ParseThreads(1, 2) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "2,2", "-1"} {
		var ce *eos.ConfigError
		if _, err := ParseThreads(bad); !errors.As(err, &ce) || ce.Setting != "bench.Config.Threads" {
			t.Errorf("ParseThreads(%q) = %v, want a ConfigError on bench.Config.Threads", bad, err)
		}
	}
}
