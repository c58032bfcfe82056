package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/rangeread"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// defaultHangingAfter is the threshold used while the brokers'
// transaction.max.timeout.ms cannot be read: Kafka's default.
const defaultHangingAfter = 15 * time.Minute

// plan says what one poll measures. Partitions are by topic.
type plan struct {
	// topics whose offsets are read.
	topics []string
	// lso are the partitions whose LSO lag, open transaction age and
	// hanging transactions are exported, by topic; a topic mapped to nil
	// means all its partitions, and a nil lso every partition read.
	lso map[string]map[int32]bool
	// groups are the groups whose consumer lag is exported, each on the
	// given partitions (nil: every partition of each topic the group has
	// committed offsets for, among topics).
	groups map[string]map[string]map[int32]bool
}

// poller reads offsets and open transactions through the admin API and
// sets the shared gauges. One poller belongs to one exporter; poll is not
// safe for concurrent use.
type poller struct {
	adm          *kadm.Client
	r            *registry
	log          *slog.Logger
	hangingAfter time.Duration // 0: ask the brokers
	threshold    time.Duration // the one in use

	lso, age, hanging, consumer series

	mu       sync.Mutex
	okAt     time.Time
	lastErr  error
	groupLag map[string]int64 // total consumer lag per group at okAt
	// lagging are, per group, the ranges between committed offset and
	// LSO of the partitions with lag at okAt.
	lagging map[string]rangeread.Ranges
}

func newPoller(adm *kadm.Client, r *registry, log *slog.Logger, hangingAfter time.Duration) *poller {
	return &poller{
		adm: adm, r: r, log: log, hangingAfter: hangingAfter,
		lso:      series{vec: r.gaugeVec(LSOLag)},
		age:      series{vec: r.gaugeVec(OpenTransactionAge)},
		hanging:  series{vec: r.gaugeVec(HangingTxns)},
		consumer: series{vec: r.gaugeVec(ConsumerLag)},
	}
}

// poll runs one round. On error the gauges keep their previous values, so
// a scrape shows the last good measurement (its time is in
// eos_last_offset_poll_timestamp_seconds).
func (p *poller) poll(ctx context.Context, pl plan) error {
	err := p.round(ctx, pl)
	result := "ok"
	p.mu.Lock()
	p.lastErr = err
	if err != nil {
		result = "error"
	} else {
		p.okAt = time.Now()
		p.r.gauge(LastOffsetPoll).Set(float64(p.okAt.UnixNano()) / 1e9)
	}
	p.mu.Unlock()
	p.r.counter(OffsetPolls, result).Inc()
	return err
}

func (p *poller) round(ctx context.Context, pl plan) error {
	if len(pl.topics) == 0 {
		return nil
	}
	all, err := inspect.ReadOffsets(ctx, p.adm, pl.topics...)
	if err != nil {
		return err
	}
	offs := exported(all, pl.lso)
	open, err := inspect.Scan(ctx, p.adm, offs, p.hangingThreshold(ctx))
	if err != nil {
		return err
	}
	lags, err := p.consumerLag(ctx, pl, all)
	if err != nil {
		return err
	}

	lso, age, hanging := map[key]float64{}, map[key]float64{}, map[key]float64{}
	for _, o := range offs.Sorted() {
		k := keyOf(o.Topic, strconv.Itoa(int(o.Partition)))
		lso[k], age[k], hanging[k] = float64(o.Unstable()), 0, 0
	}
	for _, o := range open {
		k := keyOf(o.Topic, strconv.Itoa(int(o.Partition)))
		age[k] = max(age[k], o.Age.Seconds())
		if o.Hanging {
			hanging[k]++
		}
	}
	p.lso.set(lso)
	p.age.set(age)
	p.hanging.set(hanging)
	p.consumer.set(lags)
	return nil
}

// exported returns the partitions of all that are in want (all of them if
// want is nil).
func exported(all inspect.Offsets, want map[string]map[int32]bool) inspect.Offsets {
	if want == nil {
		return all
	}
	out := inspect.Offsets{}
	for t, ps := range all {
		parts, ok := want[t]
		if !ok {
			continue
		}
		for part, o := range ps {
			if parts == nil || parts[part] {
				if out[t] == nil {
					out[t] = map[int32]inspect.PartitionOffsets{}
				}
				out[t][part] = o
			}
		}
	}
	return out
}

// consumerLag computes LSO - committed for each planned group, from every
// offset read (a group's partitions need not be exported ones).
func (p *poller) consumerLag(ctx context.Context, pl plan, offs inspect.Offsets) (map[key]float64, error) {
	out := map[key]float64{}
	if len(pl.groups) == 0 {
		return out, nil
	}
	var groups []string
	for g := range pl.groups {
		groups = append(groups, g)
	}
	fetched := p.adm.FetchManyOffsets(ctx, groups...)
	totals := map[string]int64{}
	lagging := map[string]rangeread.Ranges{}
	for _, g := range groups {
		r := fetched[g]
		if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", g, r.Err)
		}
		want := pl.groups[g]
		for _, o := range offs.Sorted() {
			c := int64(-1)
			if f, ok := r.Fetched.Lookup(o.Topic, o.Partition); ok && f.Err == nil && f.At >= 0 {
				c = f.At
			}
			switch {
			case want != nil && !want[o.Topic][o.Partition]:
				continue
			case want == nil && len(r.Fetched[o.Topic]) == 0:
				continue // the group has no commits on this topic
			}
			lag := inspect.LagOf(o, c)
			out[keyOf(g, o.Topic, strconv.Itoa(int(o.Partition)))] = float64(lag)
			totals[g] += lag
			if lag > 0 {
				if lagging[g] == nil {
					lagging[g] = rangeread.Ranges{}
				}
				lagging[g].Add(o.Topic, o.Partition, o.LSO-lag, o.LSO)
			}
		}
	}
	p.mu.Lock()
	p.groupLag, p.lagging = totals, lagging
	p.mu.Unlock()
	return out, nil
}

// hangingThreshold returns the configured threshold, or the brokers'
// transaction.max.timeout.ms, read once and then cached.
func (p *poller) hangingThreshold(ctx context.Context) time.Duration {
	if p.hangingAfter > 0 {
		return p.hangingAfter
	}
	if p.threshold > 0 {
		return p.threshold
	}
	d, err := inspect.MaxTransactionTimeout(ctx, p.adm)
	if err != nil {
		p.log.Warn("cannot read the brokers' transaction.max.timeout.ms; calling transactions hanging after the default", "default", defaultHangingAfter, "err", err)
		return defaultHangingAfter
	}
	p.threshold = d
	return d
}

// status returns when the last poll succeeded, the last poll's error, and
// the total consumer lag per group at the last success.
func (p *poller) status() (okAt time.Time, lastErr error, groupLag map[string]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.okAt, p.lastErr, p.groupLag
}

// laggingOf returns group's lagging ranges at the last successful poll.
func (p *poller) laggingOf(group string) rangeread.Ranges {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lagging[group]
}

// key is a gauge's label values, joined.
type key string

func keyOf(lvs ...string) key {
	k := ""
	for i, v := range lvs {
		if i > 0 {
			k += "\x00"
		}
		k += v
	}
	return key(k)
}

// series sets a gauge vector to exactly the given label sets, deleting
// those no longer present (a revoked partition, a deleted topic) instead of
// resetting the vector, so that no scrape ever sees it half-filled.
type series struct {
	vec  *prometheus.GaugeVec
	have map[key][]string
}

func (s *series) set(values map[key]float64) {
	next := make(map[key][]string, len(values))
	for k, v := range values {
		lvs := s.have[k]
		if lvs == nil {
			lvs = splitKey(k)
		}
		s.vec.WithLabelValues(lvs...).Set(v)
		next[k] = lvs
	}
	for k, lvs := range s.have {
		if _, ok := next[k]; !ok {
			s.vec.DeleteLabelValues(lvs...)
		}
	}
	s.have = next
}

func splitKey(k key) []string {
	var out []string
	start := 0
	for i := 0; i < len(k); i++ {
		if k[i] == 0 {
			out = append(out, string(k[start:i]))
			start = i + 1
		}
	}
	return append(out, string(k[start:]))
}
