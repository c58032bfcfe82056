package datagen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/admin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newClient(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// readAll consumes n records from topic, failing the test on a fetch error.
func readAll(t *testing.T, ctx context.Context, c *kfake.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s after %d of %d records: %v", topic, len(recs), n, err)
		}
		recs = append(recs, fs.Records()...)
	}
	return recs
}

type decoded struct {
	Seq    int64   `json:"seq"`
	TS     int64   `json:"ts"`
	User   string  `json:"user"`
	Amount float64 `json:"amount"`
	Pad    string  `json:"pad"`
}

func TestProduceReadBack(t *testing.T) {
	for _, size := range []int{0, 100, 1024} {
		t.Run("size="+strconv.Itoa(size), func(t *testing.T) {
			ctx := testContext(t)
			c := newCluster(t)
			cl := newClient(t, c)
			const n = 500
			var calls atomic.Int64
			var last atomic.Int64
			res, err := Produce(ctx, cl, Config{
				Topic: "in", Count: n, Size: size, Partitions: 3,
				Progress: func(done, total int64) {
					calls.Add(1)
					last.Store(done)
					if total != n {
						t.Errorf("progress total %d, want %d", total, n)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Records != n || !res.Created || res.Partitions != 3 {
				t.Fatalf("result %+v, want %d records in a created 3-partition topic", res, n)
			}
			if calls.Load() == 0 || last.Load() != n {
				t.Errorf("progress: %d calls, last done %d; want >= 1 call ending at %d", calls.Load(), last.Load(), n)
			}

			seen := make([]bool, n)
			var bytes int64
			parts := map[int32]bool{}
			for _, r := range readAll(t, ctx, c, "in", n) {
				i, err := strconv.ParseInt(string(r.Key), 10, 64)
				if err != nil || i < 0 || i >= n || strconv.FormatInt(i, 10) != string(r.Key) {
					t.Fatalf("bad key %q", r.Key)
				}
				if seen[i] {
					t.Fatalf("key %d twice", i)
				}
				seen[i] = true
				parts[r.Partition] = true
				bytes += int64(len(r.Value))

				if size > 0 && len(r.Value) != size {
					t.Errorf("key %d: value is %d bytes, want %d: %s", i, len(r.Value), size, r.Value)
				}
				var d decoded
				if err := json.Unmarshal(r.Value, &d); err != nil {
					t.Fatalf("key %d: %v: %s", i, err, r.Value)
				}
				if d.Seq != i || d.User != User(i) || d.Amount != Amount(i) || d.TS != r.Timestamp.UnixMilli() {
					t.Errorf("key %d: decoded %+v (record ts %d), want seq %d user %s amount %v",
						i, d, r.Timestamp.UnixMilli(), i, User(i), Amount(i))
				}
				if strings.Trim(d.Pad, "x") != "" {
					t.Errorf("key %d: pad %q is not all x", i, d.Pad)
				}
			}
			if bytes != res.Bytes {
				t.Errorf("read %d value bytes, Result.Bytes %d", bytes, res.Bytes)
			}
			if len(parts) != 3 {
				t.Errorf("records landed on %d partitions, want all 3", len(parts))
			}
		})
	}
}

// A second Produce keeps the existing topic, whatever its partition count,
// and appends.
// A second Produce into a topic continues the key sequence, so that a copy
// of the topic verifies as exactly once rather than as duplicated keys.
func TestProduceAgainContinuesTheKeySequence(t *testing.T) {
	ctx := testContext(t)
	c := newCluster(t, kfake.SeedTopics(2, "in"))
	cl := newClient(t, c)
	for run := range int64(3) {
		res, err := Produce(ctx, cl, Config{Topic: "in", Count: 10, Partitions: 5})
		if err != nil {
			t.Fatal(err)
		}
		if res.Created || res.Partitions != 2 || res.Records != 10 || res.FirstKey != 10*run {
			t.Fatalf("run %d: result %+v, want 10 records from key %d to the existing 2-partition topic", run, res, 10*run)
		}
	}
	seen := map[string]int{}
	for _, r := range readAll(t, ctx, c, "in", 30) {
		seen[string(r.Key)]++
	}
	for k := range 30 {
		if n := seen[strconv.Itoa(k)]; n != 1 {
			t.Errorf("key %d written %d times, want once", k, n)
		}
	}
	if len(seen) != 30 {
		t.Errorf("%d distinct keys, want 30", len(seen))
	}
}

// Keys cycles the keys (a join's events about the rows of a table) while
// the values keep counting, and each key stays on one partition.
func TestProduceKeysCycleWhileTheSeqCounts(t *testing.T) {
	ctx := testContext(t)
	c := newCluster(t)
	cl := newClient(t, c)
	if _, err := Produce(ctx, cl, Config{Topic: "events", Count: 25, Keys: 7, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	seqs := map[int64]bool{}
	partOf := map[string]int32{}
	for _, r := range readAll(t, ctx, c, "events", 25) {
		var v decoded
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if want := strconv.FormatInt(v.Seq%7, 10); string(r.Key) != want {
			t.Errorf("seq %d keyed %s, want %s", v.Seq, r.Key, want)
		}
		if p, ok := partOf[string(r.Key)]; ok && p != r.Partition {
			t.Errorf("key %s on partitions %d and %d", r.Key, p, r.Partition)
		}
		partOf[string(r.Key)] = r.Partition
		seqs[v.Seq] = true
	}
	if len(seqs) != 25 || len(partOf) != 7 {
		t.Errorf("%d distinct seqs and %d keys, want 25 and 7", len(seqs), len(partOf))
	}
}

// Compact creates the topic compacted (an etl join's table), and leaves
// the policy of a topic it does not create alone.
func TestProduceCompactCreatesACompactedTopic(t *testing.T) {
	ctx := testContext(t)
	c := newCluster(t, kfake.SeedTopics(2, "existing"))
	cl := newClient(t, c)
	for _, topic := range []string{"table", "plain", "existing"} {
		if _, err := Produce(ctx, cl, Config{Topic: topic, Count: 3, Partitions: 2, Compact: topic != "plain"}); err != nil {
			t.Fatal(err)
		}
		got, err := admin.TopicConfigs(ctx, cl, topic, "cleanup.policy")
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "compact", false: "delete"}[topic == "table"]; got["cleanup.policy"] != want {
			t.Errorf("topic %s: cleanup.policy %q, want %q", topic, got["cleanup.policy"], want)
		}
	}
}

// A small rate still completes; the rate itself is not timed.
func TestProduceRate(t *testing.T) {
	ctx := testContext(t)
	c := newCluster(t)
	cl := newClient(t, c)
	res, err := Produce(ctx, cl, Config{Topic: "slow", Count: 20, Size: 64, Partitions: 1, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 20 || res.Bytes != 20*64 {
		t.Fatalf("result %+v, want 20 records of 64 bytes", res)
	}
}

func TestProduceCanceled(t *testing.T) {
	c := newCluster(t)
	cl := newClient(t, c)
	ctx, cancel := context.WithCancel(testContext(t))
	var canceled atomic.Bool
	_, err := Produce(ctx, cl, Config{
		Topic: "in", Count: 1 << 40, Partitions: 1, Rate: 1000,
		Progress: func(done, _ int64) {
			if done > 0 && canceled.CompareAndSwap(false, true) {
				cancel()
			}
		},
	})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("got %v, want an error after cancellation", err)
	}
}

func TestConfigErrors(t *testing.T) {
	ok := Config{Topic: "t", Count: 1, Partitions: 1}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"empty topic", func(c *Config) { c.Topic = "" }, "topic is empty"},
		{"bad topic", func(c *Config) { c.Topic = "a/b" }, `character '/'`},
		{"dot topic", func(c *Config) { c.Topic = ".." }, "not allowed"},
		{"long topic", func(c *Config) { c.Topic = strings.Repeat("a", 250) }, "more than Kafka's limit of 249"},
		{"zero count", func(c *Config) { c.Count = 0 }, "datagen.Config.Count: must be positive"},
		{"negative size", func(c *Config) { c.Size = -1 }, "datagen.Config.Size: must not be negative"},
		{"zero partitions", func(c *Config) { c.Partitions = 0 }, "datagen.Config.Partitions: must be positive"},
		{"negative rate", func(c *Config) { c.Rate = -5 }, "datagen.Config.Rate: must not be negative"},
		{"negative keys", func(c *Config) { c.Keys = -1 }, "datagen.Config.Keys: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mod(&cfg)
			// A nil client proves nothing is attempted before validation.
			_, err := Produce(t.Context(), nil, cfg)
			if !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a configuration error containing %q", err, tc.want)
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValueSizes(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_123)
	for _, i := range []int64{0, 7, 99, 12345, 1 << 40} {
		minSize := MinSize(i, ts)
		for size := 0; size < minSize+20; size++ {
			v := Value(i, ts, size)
			if want := max(size, minSize); len(v) != want {
				t.Fatalf("Value(%d, size %d) is %d bytes, want %d: %s", i, size, len(v), want, v)
			}
			var d decoded
			if err := json.Unmarshal(v, &d); err != nil {
				t.Fatalf("Value(%d, size %d): %v: %s", i, size, err, v)
			}
			if d.Seq != i || d.TS != ts.UnixMilli() || d.User != User(i) || d.Amount != Amount(i) {
				t.Fatalf("Value(%d, size %d) decoded to %+v", i, size, d)
			}
		}
	}
}

func TestUserAmount(t *testing.T) {
	users := map[string]int{}
	for i := range int64(16000) {
		users[User(i)]++
		a := Amount(i)
		if a < 0 || a > 99.9 || a*10 != float64(int64(a*10+0.5)) {
			t.Fatalf("Amount(%d) = %v, want one decimal in [0, 99.9]", i, a)
		}
	}
	if len(users) != NumUsers {
		t.Fatalf("%d distinct users, want %d: %v", len(users), NumUsers, users)
	}
	for u, n := range users {
		if len(u) != len("user-00") || !strings.HasPrefix(u, "user-") || n < 500 {
			t.Errorf("user %q used %d times of 16000", u, n)
		}
	}
	if Amount(1) != 91.9 {
		t.Errorf("Amount(1) = %v, want 91.9", Amount(1))
	}
}

// Every line is one record, empty lines and a last line without a newline
// included, so that no text is dropped; keys continue the sequence.
func TestProduceLines(t *testing.T) {
	lines, err := Lines(strings.NewReader("the quick fox\r\n\nlazy dog"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%q", lines); got != `["the quick fox" "" "lazy dog"]` {
		t.Fatalf("Lines = %s", got)
	}
	ctx := testContext(t)
	c := newCluster(t)
	cl := newClient(t, c)
	if _, err := Produce(ctx, cl, Config{Topic: "text", Count: 2, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := Produce(ctx, cl, Config{Topic: "text", Count: 3, Values: lines, Partitions: 1})
	if err != nil || res.FirstKey != 2 || res.Records != 3 {
		t.Fatalf("Produce(lines) = %+v, %v; want 3 records from key 2", res, err)
	}
	recs := readAll(t, ctx, c, "text", 5)
	for i, r := range recs[2:] {
		if string(r.Key) != strconv.Itoa(i+2) || string(r.Value) != string(lines[i]) {
			t.Errorf("record %d: key %s value %q, want key %d value %q", i, r.Key, r.Value, i+2, lines[i])
		}
	}
	if err := (Config{Topic: "text", Count: 2, Values: lines, Partitions: 1}).Validate(); err == nil {
		t.Error("Count 2 with 3 values validated")
	}
}
