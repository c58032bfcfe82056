package reconcile

import (
	"context"
	"fmt"
	"slices"

	"github.com/eosctl/eos/sink"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lookupKeys is how many keys one look-up asks for.
const lookupKeys = 1000

// repairBatch is how many missing records one repair transaction writes.
const repairBatch = 500

// cand is a record the sink may have kept for a key: per partition, the
// first record of the key (insert mode) or the last (upsert mode). A key
// whose records span partitions has one per partition, since the sink
// writes partitions independently and which one's record reached the
// table first (or last) is not in the topic.
type cand struct {
	partition int32
	offset    int64
	vals      []string
	rec       *kgo.Record
}

type keyState struct {
	key   any
	cands []cand
}

// judge judges one bucket at a time.
type judge struct {
	st       *store
	q        querier
	sp       *spill
	rep      *Report
	max      int  // findings listed per kind
	textKeys bool // pass keys to the look-up as text (see store.textKeys)
	repair   []*kgo.Record
	// suspects are the changed keys of an insert-mode run that did not
	// read from the log start: an earlier record of the key, below the
	// range, may be the one the sink kept (see recheck).
	suspects map[string]*suspect
	partial  bool
}

type suspect struct {
	row   []string
	cands []cand
}

func (j *judge) add(kind string, f Finding) {
	var list *[]Finding
	switch kind {
	case "missing":
		j.rep.MissingCount++
		list = &j.rep.Missing
	case "changed":
		j.rep.ChangedCount++
		list = &j.rep.Changed
	default:
		j.rep.ExtraCount++
		list = &j.rep.Extra
	}
	if len(*list) < j.max {
		*list = append(*list, f)
	}
}

// bucket judges bucket i: its records' keys against their rows, and with
// extras its table keys against its records.
func (j *judge) bucket(ctx context.Context, i int) error {
	upsert := j.st.cfg.Mapping.Mode == sink.ModeUpsert
	states := map[string]*keyState{}
	var extra []string
	err := j.sp.read(i, func(e *spilled) error {
		st := states[e.keyText]
		if st == nil {
			st = &keyState{key: e.key}
			states[e.keyText] = st
		}
		c := cand{partition: e.partition, offset: e.offset, vals: e.vals, rec: e.rec}
		for k := range st.cands {
			if st.cands[k].partition == e.partition {
				if upsert {
					st.cands[k] = c
				}
				return nil
			}
		}
		st.cands = append(st.cands, c)
		return nil
	}, func(k string) error {
		// A bucket holds its records before its table keys.
		if states[k] == nil {
			extra = append(extra, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	j.rep.Keys += len(states)
	slices.Sort(extra)
	for _, k := range extra {
		j.add("extra", Finding{Kind: "extra", Key: k})
	}
	keys := make([]string, 0, len(states))
	for k, st := range states {
		keys = append(keys, k)
		slices.SortFunc(st.cands, func(a, b cand) int { return int(a.partition) - int(b.partition) })
	}
	slices.Sort(keys)
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), lookupKeys)]
		keys = keys[len(chunk):]
		args := make([]any, len(chunk))
		for n, k := range chunk {
			args[n] = states[k].key
			if j.textKeys {
				args[n] = k
			}
		}
		rows := map[string][]string{}
		err := j.st.lookup(ctx, j.q, args, func(key string, vals []any) {
			t := make([]string, len(vals))
			for n, v := range vals {
				t[n] = text(v)
			}
			rows[key] = t
		})
		if err != nil {
			return err
		}
		for _, k := range chunk {
			if err := j.one(ctx, k, states[k], rows[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// one judges key k, whose row is row (nil: none).
func (j *judge) one(ctx context.Context, k string, st *keyState, row []string) error {
	first := st.cands[0]
	if row == nil {
		j.add("missing", Finding{Kind: "missing", Key: k, Partition: first.partition, Offset: first.offset})
		if first.rec != nil {
			j.repair = append(j.repair, first.rec)
			if len(j.repair) >= repairBatch {
				return j.flushRepair(ctx)
			}
		}
		return nil
	}
	if matchesAny(st.cands, row) {
		return nil
	}
	if j.partial && j.st.cfg.Mapping.Mode != sink.ModeUpsert {
		j.suspects[k] = &suspect{row: row, cands: st.cands}
		return nil
	}
	j.changed(k, first, row)
	return nil
}

func (j *judge) changed(k string, c cand, row []string) {
	for n, col := range j.st.cfg.Mapping.Columns {
		if !same(c.vals[n], row[n]) {
			j.add("changed", Finding{Kind: "changed", Key: k, Partition: c.partition, Offset: c.offset, Column: col.Name, Topic: c.vals[n], Table: row[n]})
		}
	}
}

func matchesAny(cands []cand, row []string) bool {
	for _, c := range cands {
		ok := true
		for n := range row {
			if !same(c.vals[n], row[n]) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// flushRepair writes the missing records collected so far through the
// sink's idempotent write.
func (j *judge) flushRepair(ctx context.Context) error {
	if len(j.repair) == 0 {
		return nil
	}
	n, err := sink.WriteRecords(ctx, j.st.db, j.st.cfg.Mapping, j.repair)
	if err != nil {
		return fmt.Errorf("repairing %d missing rows: %w", len(j.repair), err)
	}
	j.rep.Repaired += n
	j.repair = j.repair[:0]
	return nil
}

// recheck settles the suspects of an insert-mode run that did not read from
// the log start: it reads the topic below the range for their keys, and a
// key's earlier first record (per partition) replaces the candidate the
// range gave. Only rows that match none of the key's true first records
// are reported changed. Memory: the suspects only.
func (j *judge) recheck(ctx context.Context, below []verify.PartitionRange) error {
	if len(j.suspects) == 0 {
		return nil
	}
	m := j.st.cfg.Mapping
	earlier := map[string]map[int32]cand{}
	err := read(ctx, j.st.cfg, below, func(r *kgo.Record) {
		key, vals, err := m.Row(r)
		if err != nil {
			return
		}
		k := text(key)
		if j.suspects[k] == nil {
			return
		}
		if earlier[k] == nil {
			earlier[k] = map[int32]cand{}
		}
		if _, seen := earlier[k][r.Partition]; !seen {
			earlier[k][r.Partition] = cand{partition: r.Partition, offset: r.Offset, vals: texts(vals)}
		}
	})
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(j.suspects))
	for k := range j.suspects {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := j.suspects[k]
		cands := slices.Clone(s.cands)
		for n, c := range cands {
			if e, ok := earlier[k][c.partition]; ok {
				cands[n] = e
			}
		}
		for p, e := range earlier[k] {
			if !slices.ContainsFunc(cands, func(c cand) bool { return c.partition == p }) {
				cands = append(cands, e)
			}
		}
		slices.SortFunc(cands, func(a, b cand) int { return int(a.partition) - int(b.partition) })
		if !matchesAny(cands, s.row) {
			j.changed(k, cands[0], s.row)
		}
	}
	return nil
}

func texts(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = text(v)
	}
	return out
}
