package topologies

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Lines spread over 3 partitions, words re-keyed through the repartition
// topic and counted there, through aborted transactions: every word's
// emitted counts are exactly 1, 2, ..., n in order, n its number of
// occurrences.
func TestWordCountCountsEveryWordOnce(t *testing.T) {
	e := newTEnv(t)
	want := map[string]int{}
	rs := lines(3, 0, 6000, want)
	e.topic("wc-in", 3)
	w := e.run("wc", "wordcount", WordCount{}, "wc-in", "wc-out", []string{"wc-counts-repartition"},
		aborting(e, 0.2), func() { e.produce("wc-in", 3, rs) })
	checkCounts(t, e, want)
	if want["état"] == 0 || want["über"] == 0 {
		t.Fatal("lower-casing of non-ASCII words is not exercised")
	}
	t.Logf("%d lines, %d distinct words; %d commits, %d aborts", len(rs), len(want), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}

// The state survives the broker's compaction of its changelog: a worker
// counts words, the broker compacts the changelog down to about one record
// per word, and a second worker restored from what is left goes on
// counting from exactly where the first stopped.
//
// On Apache Kafka the cleaner compacts closed segments only, so there the
// segments roll every second (log.roll.ms), on a cluster of the test's
// own.
func TestWordCountRestoresExactlyFromACompactedChangelog(t *testing.T) {
	cfgs := map[string]string{"log.cleaner.backoff.ms": "100"}
	if testbroker.IsKafka() {
		cfgs["log.roll.ms"] = "1000"
	}
	e := newTEnvWith(t, broker.Config{BrokerConfigs: cfgs})
	want := map[string]int{}
	e.topic("cc-in", 3)
	first := lines(5, 0, 3000, want)
	small := func(c *pipeline.Config) { c.MaxTxnRecords = 50 } // many transactions, many changelog records
	e.run("cc", "wordcount", WordCount{}, "cc-in", "cc-out", []string{"cc-counts-repartition"}, small, func() { e.produce("cc-in", 3, first) })

	// The changelog's end offsets count every record the first worker
	// wrote (and the transaction markers); compaction leaves about one
	// record per word and partition (and each partition's last batch).
	ends, err := kadm.NewClient(e.cl).ListEndOffsets(e.ctx, "cc-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	var written int64
	ends.Each(func(o kadm.ListedOffset) { written += o.Offset })
	var left int
	deadline := time.Now().Add(30 * time.Second)
	for left = len(e.read("cc-counts-changelog")); int64(left) > written/4 && time.Now().Before(deadline); left = len(e.read("cc-counts-changelog")) {
		time.Sleep(200 * time.Millisecond)
	}
	if int64(left) > written/4 {
		t.Fatalf("the changelog was not compacted: %d records left of %d offsets written, after 30s", left, written)
	}

	second := lines(5, 3000, 3000, want)
	w := e.run("cc", "wordcount", WordCount{}, "cc-in", "cc-out", []string{"cc-counts-repartition"}, small, func() { e.produce("cc-in", 3, second) })
	checkCountsOf(t, e, "cc-out", want)
	t.Logf("changelog compacted from %d offsets to %d records (%d distinct words); the second worker restored %d", written, left, len(want), w.Stats().Restored.Load())
}

// lines returns n lines of words, numbered from first, drawn with seed, and
// adds their words to want.
func lines(seed uint64, first, n int, want map[string]int) []*kgo.Record {
	vocab := strings.Fields("the quick brown fox jumps over the lazy dog Kafka exactly once état Über 42")
	rng := rand.New(rand.NewPCG(seed, uint64(first)))
	var rs []*kgo.Record
	for i := first; i < first+n; i++ {
		var line []string
		for range 1 + rng.IntN(8) {
			line = append(line, vocab[rng.IntN(len(vocab))])
		}
		text := strings.Join(line, []string{" ", ", ", "! ", "\t"}[i%4])
		for _, w := range Words(text) {
			want[w]++
		}
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(text)})
	}
	return rs
}

// checkCounts checks that every word's emitted counts in wc-out are exactly
// 1, 2, ..., n in order, n its occurrences in want.
func checkCounts(t *testing.T, e *tenv, want map[string]int) { checkCountsOf(t, e, "wc-out", want) }

func checkCountsOf(t *testing.T, e *tenv, out string, want map[string]int) {
	t.Helper()
	got := map[string][]int{}
	for _, r := range e.read(out) {
		n, err := strconv.Atoi(string(r.Value))
		if err != nil {
			t.Fatalf("count %q: %v", r.Value, err)
		}
		got[string(r.Key)] = append(got[string(r.Key)], n)
	}
	if len(got) != len(want) {
		t.Fatalf("%d words counted, want %d", len(got), len(want))
	}
	for word, n := range want {
		seq := make([]int, n)
		for i := range seq {
			seq[i] = i + 1
		}
		if fmt.Sprint(got[word]) != fmt.Sprint(seq) {
			t.Fatalf("counts of %q: %v, want 1..%d", word, got[word], n)
		}
	}
}

// The wordcount example of README.md and docs/topologies.md counts the
// words of topologies/examples/words.txt: the docs test runs it, and this
// checks that the count it waits for and the top words it shows are the
// file's (the docs test checks only that the block prints something).
func TestTheWordCountExampleHasTheWordsTheDocsShow(t *testing.T) {
	text, err := os.ReadFile("examples/words.txt")
	if err != nil {
		t.Fatal(err)
	}
	words := Words(string(text))
	counts := map[string]int{}
	for _, w := range words {
		counts[w]++
	}
	top := slices.Collect(maps.Keys(counts))
	slices.SortFunc(top, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	var shown strings.Builder
	for _, w := range top[:3] {
		fmt.Fprintf(&shown, "%s\t%d\n", w, counts[w])
	}
	for _, doc := range []string{"../README.md", "../docs/topologies.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("--wait-for %d ", len(words)); !strings.Contains(string(b), want) {
			t.Errorf("%s: no %q: the example's file has %d words", doc, want, len(words))
		}
		if !strings.Contains(string(b), shown.String()) {
			t.Errorf("%s does not show the example's top 3 words:\n%s", doc, shown.String())
		}
	}
}
