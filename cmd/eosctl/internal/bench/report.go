package bench

import (
	"math"
	"slices"
	"time"

	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/pipeline"
)

// Report is everything a benchmark measured, shaped for scripts as
// {"params": {...}, "cells": [...]}.
type Report struct {
	Params Params `json:"params"`
	Cells  []Cell `json:"cells"`
	// Auto compares each auto cell with the fixed intervals of its size.
	Auto []AutoCheck `json:"auto,omitempty"`
}

// Params are the parameters of the run and the machine it ran on.
type Params struct {
	Started    time.Time `json:"started"`
	ElapsedS   float64   `json:"elapsed_s"`
	Command    string    `json:"command,omitempty"`
	GoVersion  string    `json:"go_version"`
	OS         string    `json:"os"`
	Arch       string    `json:"arch"`
	Cores      int       `json:"cores"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	CPUModel   string    `json:"cpu_model,omitempty"`

	Broker  string   `json:"broker"` // "embedded" (kfake) or "external"
	Brokers []string `json:"brokers,omitempty"`
	// BrokersFrom says where the brokers were named (for eosctl:
	// "--brokers" or "EOSCTL_BROKERS"); empty for the embedded broker or a
	// library caller that does not say.
	BrokersFrom string `json:"brokers_from,omitempty"`
	// TopicPrefix names the topics and groups created (and deleted) on an
	// external cluster.
	TopicPrefix string  `json:"topic_prefix,omitempty"`
	RTT         string  `json:"rtt"`
	RTTMs       float64 `json:"rtt_ms"`

	Modes []Mode `json:"modes"`
	// Orders are the order the modes ran in each round (RoundOrder), as
	// "baseline,bare,eos"; an auto cell runs eos first until it has run.
	Orders []string `json:"orders"`
	// Clock says how throughput was timed, for every mode alike.
	Clock            string `json:"clock"`
	NoIdempotencyKey bool   `json:"no_idempotency_key,omitempty"`
	// Threads are the copiers' parallelism, one sweep at each (see
	// Config.Threads).
	Threads []int `json:"threads"`
	// ClientSettings are each mode's effective client settings: the Go
	// modes' as their options resolve, the JVM modes' as the peer
	// reported them from the clients it built.
	ClientSettings map[Mode]pipeline.ClientSettings `json:"client_settings"`
	// WarmupRecords, JVMHeap and KStreamsStore are the JVM peers' (see
	// Config); empty without JVM modes.
	WarmupRecords int64  `json:"warmup_records,omitempty"`
	JVMHeap       string `json:"jvm_heap,omitempty"`
	KStreamsStore string `json:"kstreams_store,omitempty"`

	Topology string `json:"topology"`
	// ETLConfigs are the etl topology's configurations by mode, and
	// SchemaRegistry the registry eos-avro ran against (etl.go).
	ETLConfigs     map[Mode]string `json:"etl_configs,omitempty"`
	SchemaRegistry string          `json:"schema_registry,omitempty"`
	KeyHeader      string          `json:"key_header,omitempty"` // every backlog record's key, in this header too
	TableRows      int64           `json:"table_rows,omitempty"` // the join's table (--topology join)
	Intervals      []string        `json:"intervals"`
	Sizes          []int           `json:"sizes"`
	Records        []int64         `json:"records"` // per size, in the order of sizes
	Partitions     int32           `json:"partitions"`
	Workers        int             `json:"workers"`
	Repeat         int             `json:"repeat"`

	OverheadBudget      float64 `json:"overhead_budget"`
	MaxCommitInterval   string  `json:"max_commit_interval"`
	LatencyRate         int     `json:"latency_rate"`
	LatencyDurationNote string  `json:"latency_duration"`

	// Copiers says how the copiers ran; CPUScope and RSSScope say what the
	// CPU and peak-RSS figures cover as a consequence.
	Copiers  string `json:"copiers"`
	CPUScope string `json:"cpu_scope"`
	RSSScope string `json:"rss_scope"`
}

// RunResult is one run: one mode of one cell in one round.
type RunResult struct {
	Round int `json:"round"`
	// Seq is the run's place in its cell's round, from 1.
	Seq      int    `json:"seq"`
	Mode     Mode   `json:"mode"`
	Interval string `json:"interval"`
	Size     int    `json:"size"`
	Threads  int    `json:"threads"`
	Records  int64  `json:"records"`
	// Settings are the client settings a JVM peer reported (nil for the
	// Go modes; see Params.ClientSettings).
	Settings *pipeline.ClientSettings `json:"settings,omitempty"`

	// RPS is the one clock's throughput (see Params.Clock): the group's
	// committed offsets on the backlog, as the broker showed them, between
	// 10% and 90% of the backlog; WindowS is that window. ShortWindow says
	// one commit carried the group past both marks, so the rate is from
	// the run's start to the whole backlog.
	RPS         float64 `json:"rps"`
	MBps        float64 `json:"mbps"` // record values only, 10^6 bytes
	WindowS     float64 `json:"window_s"`
	ShortWindow bool    `json:"short_window,omitempty"`
	// EventRPS and EventWindowS are a diagnostic, the copier's own clock:
	// for a copy, its commit events from its first transaction's first
	// record to its last full commit; for the aggregate, the backlog over
	// the time until the group had consumed the input and the repartition
	// topic. Not comparable between modes (Kafka Streams' events are the
	// broker's offsets, from RUNNING).
	EventRPS     float64 `json:"event_rps"`
	EventWindowS float64 `json:"event_window_s"`
	Commits      int     `json:"commits"`
	CommitFigures
	// LiveCommitP99Ms is the p99 of the latency phase's commits.
	LiveCommitP99Ms float64 `json:"live_commit_p99_ms"`

	// E2E figures are the latency phase's. A quantile is meaningful only
	// from enough samples (e2eQuantileOK): the table says "few" instead of
	// a p99 from fewer than 1,000 or a p99.9 from fewer than 10,000.
	E2ESamples int     `json:"e2e_samples"`
	E2EP50Ms   float64 `json:"e2e_p50_ms"`
	E2EP99Ms   float64 `json:"e2e_p99_ms"`
	E2EP999Ms  float64 `json:"e2e_p999_ms"`
	E2EMaxMs   float64 `json:"e2e_max_ms"`

	CPUSeconds   float64 `json:"cpu_s"`
	CPUSecPerM   float64 `json:"cpu_s_per_m"`
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
	Aborted      int     `json:"aborted"`
	Reinits      int     `json:"reinits"`
	CommittedRec int64   `json:"committed_records"`

	// Verified says the output held every backlog record exactly once and
	// in order, read with read_committed after the drain; Duplicates and
	// Missing are the check's counts.
	Verified   bool  `json:"verified"`
	Duplicates int64 `json:"duplicates"`
	Missing    int64 `json:"missing"`
	// Aggregate is the aggregate topology's judgement (aggcheck.Judge),
	// nil for the other topologies; Verified is its OK, Duplicates and
	// Missing its windows' and dead letters' twice and missing counts.
	Aggregate *aggcheck.Report `json:"aggregate,omitempty"`
	// JoinsChecked counts the join's output records checked against their
	// event and their row's reference (join.go); 0 for other topologies.
	JoinsChecked int64 `json:"joins_checked,omitempty"`
}

// Cell is one (interval, size, threads) of the sweep: each mode's figures
// (medians over its rounds) and the throughput ratios of the modes that
// ran back to back. A mode that did not run has no entry in either.
type Cell struct {
	Interval string `json:"interval"`
	Size     int    `json:"size"`
	Threads  int    `json:"threads"`
	Records  int64  `json:"records"`
	Rounds   int    `json:"rounds"`

	// Modes are each mode's figures, by mode.
	Modes map[Mode]ModeFigures `json:"modes"`
	// Ratios are throughput ratios between modes, keyed "num/den" (as
	// "eos/baseline"): the median over rounds of num's rec/s over den's in
	// the same round, which ran back to back, with their spread. eos over
	// every other mode that ran, bare over baseline (the cost of
	// exactly-once through franz-go alone), and eos-nopreagg over kstreams
	// (the two engines on the same algorithm). See Cell.Ratio.
	Ratios map[string]Ratio `json:"ratios"`
	// LossPct is eos's throughput loss against the baseline,
	// (1 - eos/baseline) × 100; 0 without a baseline.
	LossPct float64 `json:"loss_pct"`

	Aborted int `json:"aborted"`
	Reinits int `json:"reinits"`

	Runs []RunResult `json:"runs"`
}

// ModeFigures are one mode's figures in a cell: medians over its rounds,
// with the spread of rec/s and of the e2e p99, the largest e2e maximum and
// peak RSS, and the fewest latency samples of a round. The JVM modes
// report no commits: their commit figures are 0, and the table says "-".
type ModeFigures struct {
	RPS    float64 `json:"rps"`
	RPSMin float64 `json:"rps_min"`
	RPSMax float64 `json:"rps_max"`
	MBps   float64 `json:"mbps"`

	// CommitFigures are the medians of the runs' (all 0 for the JVM
	// modes, which report no commits).
	CommitFigures

	E2EP50Ms    float64 `json:"e2e_p50_ms"`
	E2EP99Ms    float64 `json:"e2e_p99_ms"`
	E2EP99MinMs float64 `json:"e2e_p99_min_ms"`
	E2EP99MaxMs float64 `json:"e2e_p99_max_ms"`
	// E2EP999Ms is the p99.9 (median over rounds) and E2ESamples the
	// fewest samples of its rounds: below 10,000 the p99.9 is the max of
	// too few to mean anything, and the table says so.
	E2EP999Ms  float64 `json:"e2e_p999_ms"`
	E2EMaxMs   float64 `json:"e2e_max_ms"`
	E2ESamples int     `json:"e2e_samples"`

	CPUSecPerM float64 `json:"cpu_s_per_m"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// Runs and Verified count the mode's runs and those whose output
	// passed the exactly-once check.
	Runs     int `json:"runs"`
	Verified int `json:"verified"`
}

// CommitFigures are how a copier committed: a run's figures, and in a
// cell the medians of its runs'. The JVM modes report no commits.
type CommitFigures struct {
	TxnPerSec   float64 `json:"txn_per_s"`
	CommitP50Ms float64 `json:"commit_p50_ms"`
	CommitP99Ms float64 `json:"commit_p99_ms"`
	// FlushP50Ms is the median wait for the records in flight at a commit,
	// part of the commit; the rest is the offset commit (and EndTxn).
	FlushP50Ms float64 `json:"commit_flush_p50_ms"`
	TxnP50Ms   float64 `json:"txn_p50_ms"`
	TxnP99Ms   float64 `json:"txn_p99_ms"`
	OpenP50Ms  float64 `json:"open_p50_ms"`
	// OverheadPct is the share of the drain spent committing (busy);
	// LiveOverheadPct the share of the latency phase (lightly loaded),
	// whose commits (LiveCommitP50Ms) are only their round trips.
	OverheadPct     float64 `json:"overhead_pct"`
	LiveOverheadPct float64 `json:"live_overhead_pct"`
	LiveCommitP50Ms float64 `json:"live_commit_p50_ms"`
	LiveOpenP50Ms   float64 `json:"live_open_p50_ms"`
}

// Ratio is the median over rounds of a per-round throughput ratio, and its
// spread.
type Ratio struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Ratio returns the throughput ratio of num over den (see Cell.Ratios);
// the zero Ratio if the two did not run in the same rounds.
func (c Cell) Ratio(num, den Mode) Ratio { return c.Ratios[ratioKey(num, den)] }

func ratioKey(num, den Mode) string { return string(num) + "/" + string(den) }

// AutoCheck compares an auto cell with the fixed intervals of the same size:
// did it hold its budget, and how does its latency compare with the best
// (shortest) fixed interval whose overhead met the same budget. Latency is
// measured in the latency phase, so that is where the overheads are
// compared; the drain's (busy) overhead is reported beside it.
type AutoCheck struct {
	Size             int     `json:"size"`
	BudgetPct        float64 `json:"budget_pct"`
	LiveOverheadPct  float64 `json:"live_overhead_pct"`
	DrainOverheadPct float64 `json:"drain_overhead_pct"`
	WithinOnePoint   bool    `json:"within_one_point"`  // live overhead within 1 point of the budget
	LiveOpenP50Ms    float64 `json:"live_open_p50_ms"`  // the interval auto settled on, lightly loaded
	DrainOpenP50Ms   float64 `json:"drain_open_p50_ms"` // and while draining
	E2EP99Ms         float64 `json:"e2e_p99_ms"`
	BestFixed        string  `json:"best_fixed,omitempty"` // empty if no fixed interval met the budget
	BestE2EP99Ms     float64 `json:"best_fixed_e2e_p99_ms,omitempty"`
	LatencyVsBest    float64 `json:"latency_vs_best,omitempty"` // auto e2e p99 / best fixed e2e p99
	WithinTwiceBest  bool    `json:"within_twice_best"`
}

// cell aggregates the runs of one (interval, size).
func cell(interval string, size int, records int64, runs []RunResult) Cell {
	c := Cell{Interval: interval, Size: size, Records: records, Runs: runs,
		Modes: map[Mode]ModeFigures{}, Ratios: map[string]Ratio{}}
	for _, m := range knownModes {
		f, ok := modeFigures(runs, m)
		if !ok {
			continue
		}
		c.Modes[m] = f
		if c.Rounds == 0 || f.Runs < c.Rounds {
			c.Rounds = f.Runs
		}
	}
	pairs := [][2]Mode{{ModeBare, ModeBaseline}, {ModeEOSNoPreagg, ModeKStreams}, {ModeEOSAvro, ModeEOS}}
	for _, m := range knownModes {
		if m != ModeEOS {
			pairs = append(pairs, [2]Mode{ModeEOS, m})
		}
	}
	for _, pr := range pairs {
		if xs := roundRatios(runs, pr[0], pr[1]); len(xs) > 0 {
			c.Ratios[ratioKey(pr[0], pr[1])] = Ratio{Median: median(xs), Min: minOf(xs), Max: maxOf(xs)}
		}
	}
	if r, ok := c.Ratios[ratioKey(ModeEOS, ModeBaseline)]; ok {
		c.LossPct = (1 - r.Median) * 100
	}
	for _, r := range runs {
		c.Aborted += r.Aborted
		c.Reinits += r.Reinits
	}
	return c
}

// modeFigures aggregates the runs of mode m; false if m did not run.
func modeFigures(runs []RunResult, m Mode) (ModeFigures, bool) {
	var rs []RunResult
	for _, r := range runs {
		if r.Mode == m {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return ModeFigures{}, false
	}
	all := func(f func(RunResult) float64) []float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return xs
	}
	med := func(f func(RunResult) float64) float64 { return median(all(f)) }
	rps := all(func(r RunResult) float64 { return r.RPS })
	p99 := all(func(r RunResult) float64 { return r.E2EP99Ms })
	f := ModeFigures{
		RPS: median(rps), RPSMin: minOf(rps), RPSMax: maxOf(rps),
		MBps: med(func(r RunResult) float64 { return r.MBps }),
		CommitFigures: CommitFigures{
			TxnPerSec:       med(func(r RunResult) float64 { return r.TxnPerSec }),
			CommitP50Ms:     med(func(r RunResult) float64 { return r.CommitP50Ms }),
			CommitP99Ms:     med(func(r RunResult) float64 { return r.CommitP99Ms }),
			FlushP50Ms:      med(func(r RunResult) float64 { return r.FlushP50Ms }),
			TxnP50Ms:        med(func(r RunResult) float64 { return r.TxnP50Ms }),
			TxnP99Ms:        med(func(r RunResult) float64 { return r.TxnP99Ms }),
			OpenP50Ms:       med(func(r RunResult) float64 { return r.OpenP50Ms }),
			OverheadPct:     med(func(r RunResult) float64 { return r.OverheadPct }),
			LiveOverheadPct: med(func(r RunResult) float64 { return r.LiveOverheadPct }),
			LiveCommitP50Ms: med(func(r RunResult) float64 { return r.LiveCommitP50Ms }),
			LiveOpenP50Ms:   med(func(r RunResult) float64 { return r.LiveOpenP50Ms }),
		},
		E2EP50Ms: med(func(r RunResult) float64 { return r.E2EP50Ms }),
		E2EP99Ms: median(p99), E2EP99MinMs: minOf(p99), E2EP99MaxMs: maxOf(p99),
		E2EP999Ms:  med(func(r RunResult) float64 { return r.E2EP999Ms }),
		E2EMaxMs:   maxOf(all(func(r RunResult) float64 { return r.E2EMaxMs })),
		E2ESamples: int(minOf(all(func(r RunResult) float64 { return float64(r.E2ESamples) }))),
		CPUSecPerM: med(func(r RunResult) float64 { return r.CPUSecPerM }),
		PeakRSSMiB: maxOf(all(func(r RunResult) float64 { return r.PeakRSSMiB })),
		Runs:       len(rs),
	}
	for _, r := range rs {
		if r.Verified {
			f.Verified++
		}
	}
	return f, true
}

// roundRatios returns, for every round in which both modes ran, the
// throughput of num over that of den: pairs that ran back to back, so that
// the machine's drift cancels out of each ratio.
func roundRatios(runs []RunResult, num, den Mode) []float64 {
	var out []float64
	for round := 1; ; round++ {
		n, okn := findRun(runs, round, num)
		d, okd := findRun(runs, round, den)
		if !okn && !okd {
			return out
		}
		if okn && okd && d.RPS > 0 {
			out = append(out, n.RPS/d.RPS)
		}
	}
}

func findRun(runs []RunResult, round int, m Mode) (RunResult, bool) {
	for _, r := range runs {
		if r.Round == round && r.Mode == m {
			return r, true
		}
	}
	return RunResult{}, false
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Min(xs)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// autoChecks compares every auto cell with the fixed cells of its size.
func autoChecks(cells []Cell, budget float64) []AutoCheck {
	var out []AutoCheck
	for _, a := range cells {
		if a.Interval != "auto" {
			continue
		}
		ae := a.Modes[ModeEOS]
		ch := AutoCheck{Size: a.Size, BudgetPct: budget * 100, LiveOverheadPct: ae.LiveOverheadPct, DrainOverheadPct: ae.OverheadPct,
			LiveOpenP50Ms: ae.LiveOpenP50Ms, DrainOpenP50Ms: ae.OpenP50Ms, E2EP99Ms: ae.E2EP99Ms}
		ch.WithinOnePoint = math.Abs(ae.LiveOverheadPct-budget*100) <= 1
		best := time.Duration(math.MaxInt64)
		for _, f := range cells {
			d, err := time.ParseDuration(f.Interval)
			fe := f.Modes[ModeEOS]
			if err != nil || f.Size != a.Size || fe.LiveOverheadPct > budget*100 || d >= best {
				continue
			}
			best, ch.BestFixed, ch.BestE2EP99Ms = d, f.Interval, fe.E2EP99Ms
		}
		if ch.BestFixed != "" && ch.BestE2EP99Ms > 0 {
			ch.LatencyVsBest = ae.E2EP99Ms / ch.BestE2EP99Ms
			ch.WithinTwiceBest = ch.LatencyVsBest <= 2
		}
		out = append(out, ch)
	}
	return out
}
