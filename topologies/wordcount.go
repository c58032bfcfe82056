package topologies

import (
	"context"
	"strconv"
	"strings"
	"unicode"

	"github.com/eosctl/eos/pipeline"
)

// WordCount is the classic: it splits each record's value into words
// (lower-cased runs of letters and digits), re-keys every word through the
// repartition topic <app>-counts-repartition so that each word is counted in
// one place, counts in the keyed store "counts", and emits word -> new count
// (decimal) on every occurrence: the output is the changelog of the counts,
// whose last record per word is its total. It is the smallest complete
// example of a stateful topology: Declare, Record.Store, a repartition.
type WordCount struct{}

// Declare implements pipeline.Declarer.
func (WordCount) Declare() pipeline.Declaration {
	return pipeline.Declaration{Stores: []string{"counts"}, Repartition: "counts"}
}

// Process implements pipeline.Transform.
func (WordCount) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	if !in.Repartitioned {
		for _, w := range Words(string(in.Value)) {
			out.Emit(pipeline.Output{To: "counts", Key: []byte(w)})
		}
		return nil
	}
	st := in.Store("counts")
	word := string(in.Key)
	n := 0
	if v, ok := st.Get(word); ok {
		n, _ = strconv.Atoi(string(v))
	}
	v := strconv.AppendInt(nil, int64(n+1), 10)
	st.Put(word, v)
	out.Emit(pipeline.Output{Key: in.Key, Value: v})
	return nil
}

// Words splits s the way WordCount does.
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}
