package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
	"github.com/eosctl/eos/internal/eosctltest"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/internal/seed"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/internal/testenv"
)

var bin string

func TestMain(m *testing.M) {
	var cleanup func()
	var err error
	if bin, cleanup, err = eosctltest.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// inShort are the rows `go test -short` runs, a few seconds each: workers
// SIGKILLed mid-transaction on one partition (order kept), and responses
// lost after the broker applied them (EndTxn included: neither a duplicate
// nor a torn transaction), for a copy and for the aggregate topology. The
// full suite (make test, CI) runs every row.
var inShort = map[string]bool{
	"single-partition-order":   true,
	"lost-responses":           true,
	"aggregate-lost-responses": true,
}

// Every scenario, in its short form, ends with exactly-once intact: for a
// copy, verify finds every input record once in input order per partition;
// for the aggregate topology, every window result equals the reference
// computed from the input and every dead letter is there once; and the
// read_committed readers that ran during the faults saw no record twice.
//
// With EOS_TEST_BROKER=kafka every scenario, the Apache-Kafka-only ones
// included, runs against one 3-node Apache Kafka cluster, its broker faults
// made with real processes and proxies.
func TestScenariosPreserveExactlyOnce(t *testing.T) {
	var cluster *kafkacluster.Cluster
	if testbroker.IsKafka() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var err error
		cluster, err = StartKafka(ctx, t.Logf)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer cluster.Stop()
	}
	// The table of the rows that ran, as RELIABILITY.md prints it, so a
	// run of the short form (CI's included) leaves its figures in the log.
	var results []*Result
	defer func() {
		var b bytes.Buffer
		WriteTable(&b, results, "EOS_TEST_BROKER="+string(testbroker.FromEnv())+" go test ./cmd/eosctl/internal/chaos/ -run TestScenariosPreserveExactlyOnce -v")
		t.Logf("short form:\n%s", b.String())
	}()
	for _, s := range Scenarios() {
		if s.OnlyKafka && cluster == nil {
			continue // listed in RELIABILITY.md under Apache Kafka only
		}
		t.Run(s.Name, func(t *testing.T) {
			if !inShort[s.Name] {
				testenv.Long(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			logs := &fleet.Buffer{}
			res, err := RunOn(ctx, cluster, s, bin, Short, logs)
			if res != nil {
				results = append(results, res)
				t.Logf("%s: %s", s.Name, seed.Replay(res.Seed))
			}
			if err != nil {
				t.Fatalf("%v\nlogs:\n%s", err, logs.String())
			}
			if !res.OK() || res.Records == 0 {
				t.Fatalf("exactly-once broken: %s\nlogs:\n%s", res.Summary(), logs.String())
			}
			t.Logf("%s: %d records; faults: %s; recovery p50 %s max %s; %v; %s; %s", s.Name, res.Records, res.Faults, res.RecoveryP50(), res.RecoveryMax(), res.Notes, res.Summary(), res.Elapsed.Round(time.Millisecond))
		})
	}
}

// A short soak: the sampling works, exactly-once holds, and the workers'
// memory is measured (the 30-minute run is `make soak`, not CI).
func TestSoakSamplesAndStaysExactlyOnce(t *testing.T) {
	testenv.Long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Soak(ctx, bin, 6*time.Second, 5000, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Samples) < 4 || res.Samples[len(res.Samples)-1].RSSBytes == 0 || res.Samples[len(res.Samples)-1].Goroutines == 0 {
		t.Fatalf("soak samples are missing measurements: %+v", res.Samples)
	}
	if !res.Verify.OK() || !res.Tail.OK() {
		t.Fatalf("soak: %s; %s", res.Verify.Summary(), res.Tail)
	}
}
