package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MonitorConfig configures the standalone exporter of `eosctl monitor`.
type MonitorConfig struct {
	// Instance labels the exporter's metrics (app is "monitor").
	Instance string
	// Topics to export LSO lag, open transaction ages and hanging
	// transactions for; none means every non-internal topic, listed
	// again at every poll.
	Topics []string
	// Groups to export consumer lag for, on every partition of each topic
	// (among Topics) they have committed offsets for; none means every
	// group, listed again at every poll.
	Groups []string
	// Interval between polls; 0 means DefaultPollInterval.
	Interval time.Duration
	// HangingAfter is the age past which an open transaction counts as
	// hanging; 0 means the brokers' transaction.max.timeout.ms.
	HangingAfter time.Duration
	// ClientOpts reach the cluster (seed brokers, TLS, SASL).
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
}

// Monitor exports LSO lag, consumer lag and open and hanging transactions
// of any cluster's topics and groups, whoever produces and consumes them
// (Kafka Streams, any transactional producer).
type Monitor struct {
	cfg MonitorConfig
	r   *registry
	adm *kadm.Client
	cl  *kgo.Client
	p   *poller
}

// NewMonitor creates the exporter from a client made of cfg.ClientOpts
// (it does not connect yet). Close it when done.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPollInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cl, err := kgo.NewClient(cfg.ClientOpts...)
	if err != nil {
		return nil, fmt.Errorf("metrics: creating the admin client: %w", err)
	}
	m := &Monitor{cfg: cfg, r: newRegistry("monitor", cfg.Instance, Shared), cl: cl, adm: kadm.NewClient(cl)}
	for _, res := range []string{"ok", "error"} {
		m.r.counter(OffsetPolls, res)
	}
	m.r.gauge(LastOffsetPoll)
	m.p = newPoller(m.adm, m.r, cfg.Logger, cfg.HangingAfter)
	return m, nil
}

// Close closes the admin client.
func (m *Monitor) Close() { m.cl.Close() }

// Poll runs one round now. The first round's error is what start-up
// reports (a missing topic, unreachable brokers, no authorization).
func (m *Monitor) Poll(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, max(m.cfg.Interval, 5*time.Second))
	defer cancel()
	pl, err := m.plan(pctx)
	if err != nil {
		return err
	}
	return m.p.poll(pctx, pl)
}

// Run polls every Interval until ctx ends, logging failed rounds, and
// returns nil then.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := m.Poll(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("poll failed; keeping the last values", "err", err)
		}
	}
}

func (m *Monitor) plan(ctx context.Context) (plan, error) {
	topics := m.cfg.Topics
	if len(topics) == 0 {
		tds, err := m.adm.ListTopics(ctx)
		if err != nil {
			return plan{}, fmt.Errorf("listing topics: %w", err)
		}
		topics = tds.Names()
	}
	groups := m.cfg.Groups
	if len(groups) == 0 {
		ls, err := m.adm.ListGroups(ctx)
		if err != nil {
			return plan{}, fmt.Errorf("listing groups: %w", err)
		}
		groups = ls.Groups()
	}
	pl := plan{topics: topics, groups: map[string]map[string]map[int32]bool{}}
	for _, g := range groups {
		pl.groups[g] = nil
	}
	slices.Sort(pl.topics)
	return pl, nil
}

// Ready reports whether the last poll succeeded within three intervals.
func (m *Monitor) Ready() (bool, string) {
	okAt, lastErr, _ := m.p.status()
	switch {
	case okAt.IsZero() && lastErr == nil:
		return false, "starting: no poll yet"
	case lastErr != nil:
		return false, "last poll failed: " + strings.Join(strings.Fields(lastErr.Error()), " ")
	case time.Since(okAt) > 3*m.cfg.Interval:
		return false, fmt.Sprintf("no successful poll for %s", time.Since(okAt).Round(time.Second))
	}
	return true, fmt.Sprintf("last poll %s ago", time.Since(okAt).Round(time.Millisecond))
}

// Handler serves /metrics, /healthz and /readyz.
func (m *Monitor) Handler() http.Handler {
	return handler(m.r, func() (bool, string) {
		ok, why := m.Ready()
		return ok, why
	})
}
