package verify

import "slices"

// keyTable maps record keys to a per-key value V, compactly for the keys
// datagen writes. A key that is a canonical non-negative decimal (no sign, no
// leading zeros) below limit indexes a dense slice, grown to the largest such
// key seen; any other key goes to a map. With datagen's keys 0..N-1 this
// costs sizeof(V) per key and no per-key allocation, which keeps a 10M-record
// judgment in the low hundreds of megabytes.
//
// Whether a key is dense depends on the key and limit alone, never on what
// was stored before, so slot and lookup always agree on where a key lives.
//
// A zero V must mean "nothing recorded": lookup returns a pointer to a zero
// dense slot for an untouched key below the dense length.
type keyTable[V any] struct {
	dense  []V
	sparse map[string]*V
	limit  int64
}

// newKeyTable returns a table that stores decimal keys below limit densely.
func newKeyTable[V any](limit int64) *keyTable[V] {
	return &keyTable[V]{limit: limit}
}

// seq returns the dense index of key, or -1 if key is not canonical decimal
// or below limit.
func (t *keyTable[V]) seq(key []byte) int64 {
	if len(key) == 0 || len(key) > 18 || (key[0] == '0' && len(key) > 1) {
		return -1
	}
	var n int64
	for _, c := range key {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	if n >= t.limit {
		return -1
	}
	return n
}

// slot returns the value for key, allocating a zero one if needed.
func (t *keyTable[V]) slot(key []byte) *V {
	if s := t.seq(key); s >= 0 {
		if n := int(s) + 1; n > len(t.dense) {
			old := len(t.dense)
			t.dense = slices.Grow(t.dense, n-old)[:n] // amortized doubling
			clear(t.dense[old:])
		}
		return &t.dense[s]
	}
	if v, ok := t.sparse[string(key)]; ok {
		return v
	}
	if t.sparse == nil {
		t.sparse = make(map[string]*V)
	}
	v := new(V)
	t.sparse[string(key)] = v
	return v
}

// lookup returns the value for key, or nil if it cannot have been recorded.
func (t *keyTable[V]) lookup(key []byte) *V {
	if s := t.seq(key); s >= 0 {
		if s < int64(len(t.dense)) {
			return &t.dense[s]
		}
		return nil
	}
	return t.sparse[string(key)]
}

// render returns key for an example list: nil keys are shown as <nil> and
// long keys are cut, so a report stays one readable paragraph.
func render(key []byte) string {
	switch {
	case key == nil:
		return "<nil>"
	case len(key) > 64:
		return string(key[:64]) + "..."
	}
	return string(key)
}

// maxExamples is how many example keys a report keeps per category.
const maxExamples = 10

func addExample[T any](ex *[]T, v T) {
	if len(*ex) < maxExamples {
		*ex = append(*ex, v)
	}
}
