package topologies

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Lines spread over 3 partitions, words re-keyed through the repartition
// topic and counted there, through aborted transactions: every word's
// emitted counts are exactly 1, 2, ..., n in order, n its number of
// occurrences.
func TestWordCountCountsEveryWordOnce(t *testing.T) {
	e := newTEnv(t)
	vocab := strings.Fields("the quick brown fox jumps over the lazy dog Kafka exactly once état Über 42")
	rng := rand.New(rand.NewPCG(3, 3))
	want := map[string]int{}
	var rs []*kgo.Record
	for i := range 6000 {
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
	e.topic("wc-in", 3)
	w := e.run("wc", "wordcount", WordCount{}, "wc-in", "wc-out", []string{"wc-counts-repartition"},
		func(c *pipeline.Config) { c.AbortFraction = 0.2 }, func() { e.produce("wc-in", 3, rs) })
	got := map[string][]int{}
	for _, r := range e.read("wc-out") {
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
	if want["état"] == 0 || want["über"] == 0 {
		t.Fatal("lower-casing of non-ASCII words is not exercised")
	}
	t.Logf("%d lines, %d distinct words; %d commits, %d aborts", len(rs), len(want), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}
