package topologies

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Table is the latest row of each key of a topic (a compacted topic of
// customers, products, prices), materialised in memory for a stream-table
// join, as a building block for a pipeline.Transform: the etl topology's
// join is a Table behind a YAML configuration; a custom Transform embeds
// one (see ExampleTable), which makes it a pipeline.Starter the worker
// drives, and calls Get in Process.
//
// Partitions. The table is co-partitioned with the worker's input: it must
// have as many partitions as the input topic (Start refuses otherwise, with
// an error wrapping eos.ErrConfig), and a worker materialises exactly the
// table partitions whose numbers it is assigned of the input. A row's
// partition is its key's under Kafka's default partitioner (murmur2, as
// kgo's and the Java client's), so the input must be keyed by the join
// key with that partitioner too: then every record finds its row in a
// partition its worker holds. Get refuses a key whose partition this worker
// does not hold with a dead letter "join-key-partition" rather than answer
// "no row", which would be a lie.
//
// The topic is its own changelog: nothing else is written. A newly
// assigned partition is read with read_committed from its log start to its
// last stable offset before any record of the input partition is processed
// (the restore, logged every second with its progress and counted in
// Stats.Restored and the worker's Stats.Restored).
//
// Updates. Before the records of every poll are processed (Sync), the
// table is read up to a last stable offset of its partitions listed after
// those records were fetched: in a worker, by a background listing sent as
// each fetch response arrives (table_ends.go), else by Sync itself. So an
// input record is joined with a row at least as new as every update
// committed to the table before the record was fetched (or newer: one
// committed while the record waited to be processed); a record the worker
// processes again after an abort or a crash is joined anew and may see a
// newer row. "Current at its position" is exact when the table is written
// before the events that depend on it, which is the usual order (a
// customer exists before it orders).
//
// What can go wrong: rows are held in memory, raw, in byte chunks the
// collector need not scan (rowIndex; the etl join keeps only the fields
// its expressions read, checked when the row is stored): size a worker
// for its partitions' share of the table. A table partition whose last record was removed after it
// was read (a tombstone past delete.retention.ms at the very end of a
// partition) leaves the log's end beyond any record: Sync waits for it,
// gives up after tableStall, and the worker reads the table again, to the
// same end, until a record is written to that partition. Kafka never
// cleans the active segment, so this needs a partition with no writes for
// segment.ms (7 days by default). A leader that does not answer stalls
// Sync the same way, and the retry then reaches the new leader.
type Table struct {
	topic string
	// setting names the configuration that chose the topic, for errors;
	// where, if set, says where in it ("join.table in FILE:LINE").
	setting, where string

	// Shared with the assignment callbacks.
	mu      sync.Mutex
	pending []tableChange

	// The worker's goroutine only (Start, Sync, Get).
	log    *slog.Logger
	opts   []kgo.Opt
	admin  *kgo.Client // listings
	tail   *kgo.Client // reads the owned partitions; rebuilt when they change
	nparts int32
	owned  map[int32]*tablePart
	wstats *pipeline.Stats
	// own is Get's reader; readers are every reader made (own and the
	// etl join's forks'), whose counts Stats adds up.
	own       *TableReader
	readersMu sync.Mutex
	readers   []*TableReader
	// lister lists the table's ends in the background (table_ends.go);
	// nil outside a worker, and Sync then lists them itself.
	lister *endsLister
	// prepare, if set, turns each row into the form the table stores
	// (the etl join's prepared rows, etl_join.go), writing into its first
	// argument; Get then returns that form.
	prepare  func(dst, row []byte) []byte
	prepared []byte

	rows, restored atomic.Int64
	notCompacted   atomic.Bool  // see checkCompacted
	restoring      atomic.Int64 // ns spent in restores
}

type tableChange struct {
	parts    []int32
	assigned bool
}

type tablePart struct {
	rows rowIndex
	pos  int64 // next offset to read
	// restoring: read from the log start since it was assigned, and not
	// yet caught up with the end.
	restoring bool
}

// TableStats are a Table's counts since Start.
type TableStats struct {
	Rows     int64 // rows held in the partitions this worker owns
	Restored int64 // table records read (restores and updates)
	Lookups  int64 // Get calls that reached a partition this worker owns
	Misses   int64 // of those, keys without a row
	// RestoreTime is the time spent restoring newly assigned partitions
	// (from the Sync that adopted them until they were caught up).
	RestoreTime time.Duration
	// NotCompacted is set when Start found the table's topic neither
	// compacted nor of infinite retention: a restore may miss rows that
	// were written once (Start logs a warning saying so).
	NotCompacted bool
}

// NewTable returns a Table of topic. setting names what chose the topic in
// the caller's configuration ("join.table" in FILE, say), for the errors
// Start returns; "" means "topologies.Table". Errors are *eos.ConfigError.
func NewTable(topic, setting string) (*Table, error) {
	if setting == "" {
		setting = "topologies.Table"
	}
	if err := fencing.ValidateName("topic", topic); err != nil {
		return nil, eos.BadConfig(setting, "%w", err)
	}
	t := &Table{topic: topic, setting: setting, owned: map[int32]*tablePart{}}
	t.own = t.Reader()
	return t, nil
}

// Topic is the table's topic.
func (t *Table) Topic() string { return t.topic }

// Start implements pipeline.Starter: it checks that the worker reads one
// input topic with as many partitions as the table's topic.
func (t *Table) Start(ctx context.Context, env pipeline.StartEnv) error {
	t.log = env.Logger
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.opts, t.wstats = env.ClientOpts, env.Stats
	if len(env.Inputs) != 1 {
		return eos.BadConfig("pipeline.Config.Inputs", "a join with table %s reads exactly one input topic (table partition i is joined with input partition i), got %d", t.topic, len(env.Inputs))
	}
	cl, err := admin.Connect(ctx, 10*time.Second, t.opts...)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tn, err := admin.Partitions(pctx, cl, t.topic)
	if err != nil {
		cl.Close()
		return fmt.Errorf("%stable %s: %w", t.whereP(), t.topic, err)
	}
	in, err := admin.Partitions(pctx, cl, env.Inputs[0])
	if err != nil {
		cl.Close()
		return fmt.Errorf("input %s: %w", env.Inputs[0], err)
	}
	if tn != in {
		cl.Close()
		return eos.BadConfig(t.setting, "%stable topic %s has %d partitions and input %s has %d: a join needs them co-partitioned (the same partition count, both keyed by the join key with Kafka's default partitioner); repartition one of them into a topic with the other's count", t.whereP(), t.topic, tn, env.Inputs[0], in)
	}
	t.admin, t.nparts = cl, tn
	t.checkCompacted(pctx)
	if env.Fetches != nil {
		t.lister = startEndsLister(env.Fetches, func(ctx context.Context, ps []int32) (map[int32]int64, error) {
			return t.listOffsets(ctx, ps, -1)
		})
	}
	return nil
}

// checkCompacted warns when the table's topic can lose rows: a topic
// whose cleanup.policy is not compact, and whose retention is finite,
// deletes whole segments, latest rows included. A worker restoring the
// table after that no longer has those rows, and events with their keys
// then get the join's missing rule (dead letter, drop or null) although
// the row was once written. A worker that keeps running still has them
// in memory, which hides the loss until the next restart or rebalance.
// It is a warning, not a refusal: a topic of rows all rewritten within
// retention loses nothing. A broker that does not answer (no
// DescribeConfigs permission, say) gets a debug line, not a failed start.
func (t *Table) checkCompacted(ctx context.Context) {
	c, err := admin.TopicConfigs(ctx, t.admin, t.topic, "cleanup.policy", "retention.ms", "retention.bytes")
	if err != nil {
		t.log.Debug("could not check the table topic's cleanup policy", "topic", t.topic, "err", err)
		return
	}
	policy, ok := c["cleanup.policy"]
	if !ok || strings.Contains(policy, "compact") {
		return
	}
	ms, bytes := c["retention.ms"], c["retention.bytes"]
	if ms == "-1" && (bytes == "" || bytes == "-1") {
		return // deletes nothing
	}
	t.notCompacted.Store(true)
	t.log.Warn("the join's table topic is not compacted: rows older than its retention are deleted with their segments, and a worker that restores the table after that treats their keys as missing; set cleanup.policy=compact on it",
		"topic", t.topic, "cleanup.policy", policy, "retention.ms", ms, "retention.bytes", bytes)
}

// whereP prefixes an error with where the table was configured, if known.
func (t *Table) whereP() string {
	if t.where == "" {
		return ""
	}
	return t.where + ": "
}

// Assigned implements pipeline.Starter: it notes the partitions; Sync
// restores them.
func (t *Table) Assigned(parts []int32) { t.note(parts, true) }

// Revoked implements pipeline.Starter: it notes the partitions; Sync
// drops them.
func (t *Table) Revoked(parts []int32) { t.note(parts, false) }

func (t *Table) note(parts []int32, assigned bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, tableChange{slices.Clone(parts), assigned})
}

// Stop implements pipeline.Starter.
func (t *Table) Stop() {
	if t.lister != nil {
		t.lister.stop()
		t.lister = nil
	}
	if t.tail != nil {
		t.tail.Close()
		t.tail = nil
	}
	if t.admin != nil {
		t.admin.Close()
		t.admin = nil
	}
}

// Sync implements pipeline.Starter: it applies the assignment changes
// noted since the last Sync (restoring new partitions) and reads every
// owned partition up to a last stable offset listed after the poll's
// records were fetched (ends).
func (t *Table) Sync(ctx context.Context) error {
	start := time.Now()
	if err := t.applyChanges(ctx); err != nil {
		return err
	}
	if len(t.owned) == 0 {
		return nil
	}
	ends, err := t.ends(ctx)
	if err != nil {
		return err
	}
	lastLog, progress := start, start
	var before int64 = t.restored.Load()
	for {
		behind := int64(0)
		for p, tp := range t.owned {
			if d := ends[p] - tp.pos; d > 0 {
				behind += d
			}
		}
		if behind == 0 {
			break
		}
		restoring := t.restoringParts()
		if len(restoring) > 0 && time.Since(lastLog) >= time.Second {
			lastLog = time.Now()
			t.log.Info("restoring join table", "table", t.topic, "partitions", restoring, "read", t.restored.Load()-before, "remaining", behind)
		}
		if time.Since(progress) > tableStall {
			return fmt.Errorf("reading table %s: no record for %s with %d offsets still to read up to its last stable offset; the worker reopens its session and reads the table again", t.topic, tableStall, behind)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := t.tail.PollRecords(pctx, 50_000)
		cancel()
		if err := tailErr(fs); err != nil {
			return fmt.Errorf("reading table %s: %w", t.topic, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fs.NumRecords() > 0 {
			progress = time.Now()
		}
		t.apply(fs)
	}
	if restoring := t.restoringParts(); len(restoring) > 0 {
		n, d := t.restored.Load()-before, time.Since(start)
		t.log.Info("join table restored", "table", t.topic, "partitions", restoring, "rows", t.rows.Load(), "records", n, "duration", d.Round(time.Millisecond), "records_per_sec", int64(float64(n)/max(d.Seconds(), 1e-9)))
		for _, p := range restoring {
			t.owned[p].restoring = false
		}
		t.restoring.Add(int64(d))
	}
	return nil
}

// ends returns the last stable offsets of the owned partitions, listed
// after the records of the poll Sync runs for were fetched: from the
// background lister when it has such a listing (table_ends.go), else
// listed now.
func (t *Table) ends(ctx context.Context) (map[int32]int64, error) {
	ps := t.ownedParts()
	if t.lister != nil {
		if ends, ok := t.lister.ends(ctx, ps); ok {
			return ends, nil
		}
	}
	return t.listOffsets(ctx, ps, -1)
}

// tableStall bounds how long Sync waits for the table's next record while
// it is behind its last stable offset (a leader lost, a partition whose
// last record was cleaned away): the open transaction cannot commit
// meanwhile, so it gives up well within the default 60s transaction
// timeout, and the worker reopens its session and reads the table again.
const tableStall = 30 * time.Second

// tailErr returns the first fetch error other than a context's end.
func tailErr(fs kgo.Fetches) error {
	var out error
	fs.EachError(func(topic string, p int32, err error) {
		if out == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			out = fmt.Errorf("%s[%d]: %w", topic, p, err)
		}
	})
	return out
}

// apply applies fetched table records in offset order per partition.
func (t *Table) apply(fs kgo.Fetches) {
	var n int64
	fs.EachRecord(func(r *kgo.Record) {
		tp := t.owned[r.Partition]
		if tp == nil || r.Offset < tp.pos {
			return
		}
		tp.pos = r.Offset + 1
		if r.Attrs.IsControl() {
			return
		}
		n++
		before := tp.rows.len()
		if r.Value == nil {
			tp.rows.delete(r.Key)
		} else {
			tp.rows.put(r.Key, t.stored(r.Value))
		}
		t.rows.Add(int64(tp.rows.len() - before))
	})
	t.restored.Add(n)
	if t.wstats != nil {
		t.wstats.Restored.Add(n)
	}
}

// stored is what the table stores of row: row itself, or its prepared
// form, valid until the next call (rowIndex.put copies it).
func (t *Table) stored(row []byte) []byte {
	if t.prepare == nil {
		return row
	}
	t.prepared = t.prepare(t.prepared, row)
	return t.prepared
}

func (t *Table) restoringParts() []int32 {
	var out []int32
	for p, tp := range t.owned {
		if tp.restoring {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// applyChanges adopts the assignment changes noted since the last Sync:
// revoked partitions are forgotten, assigned ones start from their log
// start, and the reading client is rebuilt for the new set (a fresh
// client holds no records fetched for the old one).
func (t *Table) applyChanges(ctx context.Context) error {
	t.mu.Lock()
	changes := t.pending
	t.pending = nil
	t.mu.Unlock()
	if len(changes) == 0 {
		return nil
	}
	var added []int32
	for _, c := range changes {
		for _, p := range c.parts {
			if !c.assigned {
				if tp := t.owned[p]; tp != nil {
					t.rows.Add(-int64(tp.rows.len()))
				}
				delete(t.owned, p)
				added = slices.DeleteFunc(added, func(q int32) bool { return q == p })
				continue
			}
			if p < 0 || p >= t.nparts {
				return fmt.Errorf("input partition %d has no table partition (table %s has %d): was a partition added to one of them?", p, t.topic, t.nparts)
			}
			if t.owned[p] == nil {
				t.owned[p] = &tablePart{restoring: true}
				added = append(added, p)
			}
		}
	}
	if len(added) > 0 {
		starts, err := t.listOffsets(ctx, added, -2)
		if err != nil {
			for _, p := range added {
				delete(t.owned, p) // restored from scratch next time
			}
			return err
		}
		for _, p := range added {
			t.owned[p].pos = starts[p]
		}
	}
	if t.tail != nil {
		t.tail.Close()
		t.tail = nil
	}
	if len(t.owned) == 0 {
		return nil
	}
	at := map[int32]kgo.Offset{}
	for p, tp := range t.owned {
		at[p] = kgo.NewOffset().At(tp.pos)
	}
	cl, err := kgo.NewClient(append(slices.Clone(t.opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t.topic: at}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(16<<20), kgo.FetchMaxBytes(64<<20))...)
	if err != nil {
		return fmt.Errorf("creating the client of table %s: %w", t.topic, err)
	}
	t.tail = cl
	return nil
}

// listOffsets lists, for the partitions ps of the table, the log start
// (ts -2) or the last stable offset (ts -1, read_committed), with one
// request to each partition's leader.
func (t *Table) listOffsets(ctx context.Context, ps []int32, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t.topic
	for _, p := range ps {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	var lastErr error
	for attempt := 0; attempt < 50; attempt++ {
		out, err := t.listOnce(ctx, req, len(ps))
		if err == nil {
			return out, nil
		}
		lastErr = err
		if ctx.Err() != nil || !kerr.IsRetriable(err) && !errors.Is(err, errTableShort) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("listing the offsets of table %s: %w", t.topic, lastErr)
}

var errTableShort = errors.New("the listing lacks partitions")

func (t *Table) listOnce(ctx context.Context, req *kmsg.ListOffsetsRequest, n int) (map[int32]int64, error) {
	resp, err := req.RequestWith(ctx, t.admin)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, err
			}
			out[rp.Partition] = rp.Offset
		}
	}
	if len(out) < n {
		return nil, errTableShort
	}
	return out, nil
}

// ErrKeyPartition is the cause of the dead letter Get returns for a key
// whose table partition this worker does not hold.
var ErrKeyPartition = errors.New("the join key's table partition is not assigned to this worker")

// Get returns the row of key: its value, and whether there is one. A key
// whose partition this worker does not hold is a pipeline.DeadLetter
// ("join-key-partition") wrapping ErrKeyPartition: return it from
// Process. The value aliases the table's copy: do not modify it. Call Get
// only from Process, on the worker's goroutine (a Forker's forks each
// use a TableReader of their own).
func (t *Table) Get(key string) ([]byte, bool, error) {
	return t.own.Get(key)
}

// TableReader looks rows of a Table up for one goroutine: a Transform
// that is a pipeline.Forker gives each fork a reader of its own, and the
// forks then look rows up at the same time. It keeps the scratch and the
// counts a lookup writes.
//
// What can go wrong: a reader is for one goroutine at a time, and only
// between two of the Table's Syncs, never during one (the worker calls
// Sync before it hands a poll's records to the forks, so a Process is
// never at the same time as one).
type TableReader struct {
	t               *Table
	hashed          kgo.TopicPartitioner
	rec             kgo.Record // the partitioner's scratch record
	ahead           rowsAhead  // prefetch's notes (table_index.go)
	lookups, misses atomic.Int64
}

// Reader returns a new reader of t. It is safe for concurrent use.
func (t *Table) Reader() *TableReader {
	r := &TableReader{t: t, hashed: kgo.StickyKeyPartitioner(nil).ForTopic(t.topic)}
	t.readersMu.Lock()
	t.readers = append(t.readers, r)
	t.readersMu.Unlock()
	return r
}

// Get is Table.Get, for the reader's goroutine.
func (r *TableReader) Get(key string) ([]byte, bool, error) {
	v, err := r.row([]byte(key))
	return v, v != nil, err
}

// row is Get's row, nil when there is none.
func (r *TableReader) row(key []byte) ([]byte, error) {
	t := r.t
	p, h, ok := r.ahead.hashed(key)
	if !ok {
		p, h = r.partitionOf(key), maphash.Bytes(rowIndexSeed, key)
	}
	tp := t.owned[p]
	if tp == nil {
		return nil, pipeline.DeadLetter("join-key-partition", fmt.Errorf("key %q is in partition %d of table %s: %w (owned: %v); key the input by the join key with Kafka's default partitioner", key, p, t.topic, ErrKeyPartition, slices.Sorted(maps.Keys(t.owned))))
	}
	r.lookups.Add(1)
	v, ok := tp.rows.getHashed(key, h)
	if !ok {
		r.misses.Add(1)
		return nil, nil
	}
	if v == nil {
		v = []byte{} // an empty value is a row (that is not JSON)
	}
	return v, nil
}

// partitionOf is key's partition under Kafka's default partitioner.
func (r *TableReader) partitionOf(key []byte) int32 {
	if r.t.nparts <= 1 {
		return 0
	}
	if key == nil {
		// The default partitioner does not hash a nil key: it picks a
		// partition, as franz-go's does here.
		r.rec.Key = nil
		return int32(r.hashed.Partition(&r.rec, int(r.t.nparts)))
	}
	return keyPartition(key, r.t.nparts)
}

// Stats returns the Table's counts. It is safe for concurrent use.
func (t *Table) Stats() TableStats {
	var lookups, misses int64
	t.readersMu.Lock()
	for _, r := range t.readers {
		lookups += r.lookups.Load()
		misses += r.misses.Load()
	}
	t.readersMu.Unlock()
	return TableStats{Rows: t.rows.Load(), Restored: t.restored.Load(), Lookups: lookups, Misses: misses,
		RestoreTime: time.Duration(t.restoring.Load()), NotCompacted: t.notCompacted.Load()}
}

// String describes the Table, for logs.
func (t *Table) String() string { return "table " + t.topic }
