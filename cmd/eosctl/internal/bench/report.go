package bench

import (
	"math"
	"slices"
	"time"

	"github.com/eosctl/eos/internal/aggcheck"
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

	Topology   string   `json:"topology"`
	Intervals  []string `json:"intervals"`
	Sizes      []int    `json:"sizes"`
	Records    []int64  `json:"records"` // per size, in the order of sizes
	Partitions int32    `json:"partitions"`
	Workers    int      `json:"workers"`
	Repeat     int      `json:"repeat"`

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
	Records  int64  `json:"records"`

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
	TxnPerSec    float64 `json:"txn_per_s"`
	CommitP50Ms  float64 `json:"commit_p50_ms"`
	CommitP99Ms  float64 `json:"commit_p99_ms"`
	// FlushP50Ms is the median wait for the records in flight at a commit,
	// part of the commit; the rest is the offset commit (and EndTxn).
	FlushP50Ms  float64 `json:"commit_flush_p50_ms"`
	TxnP50Ms    float64 `json:"txn_p50_ms"`
	TxnP99Ms    float64 `json:"txn_p99_ms"`
	OpenP50Ms   float64 `json:"open_p50_ms"`
	OverheadPct float64 `json:"overhead_pct"`
	// LiveCommit figures are the commits of the latency phase, when the
	// copier is lightly loaded and a commit is only its round trips.
	LiveCommitP50Ms float64 `json:"live_commit_p50_ms"`
	LiveCommitP99Ms float64 `json:"live_commit_p99_ms"`
	LiveOpenP50Ms   float64 `json:"live_open_p50_ms"`
	LiveOverheadPct float64 `json:"live_overhead_pct"`

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
}

// Cell is one (interval, size) of the sweep: medians over rounds of every
// mode, and their ratios. Unprefixed latency and commit figures are the eos
// mode's; baseline_, bare_ and kstreams_ ones the other modes'. A mode that did not run
// leaves its figures and ratios 0.
type Cell struct {
	Interval string `json:"interval"`
	Size     int    `json:"size"`
	Records  int64  `json:"records"`
	Rounds   int    `json:"rounds"`

	BaselineRPS    float64 `json:"baseline_rps"`
	BaselineRPSMin float64 `json:"baseline_rps_min"`
	BaselineRPSMax float64 `json:"baseline_rps_max"`
	BaselineMBps   float64 `json:"baseline_mbps"`
	EOSRPS         float64 `json:"eos_rps"`
	EOSRPSMin      float64 `json:"eos_rps_min"`
	EOSRPSMax      float64 `json:"eos_rps_max"`
	EOSMBps        float64 `json:"eos_mbps"`
	// Ratio is the median over rounds of eos_rps/baseline_rps of the two
	// runs of a round, which ran back to back; RatioMin and RatioMax are
	// the spread.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
	LossPct  float64 `json:"loss_pct"`

	BareRPS    float64 `json:"bare_rps"`
	BareRPSMin float64 `json:"bare_rps_min"`
	BareRPSMax float64 `json:"bare_rps_max"`
	BareMBps   float64 `json:"bare_mbps"`
	// BareRatio is the median over rounds of eos_rps/bare_rps: what eos's
	// engine costs (< 1) or saves (> 1) against the hand-written loop.
	BareRatio    float64 `json:"eos_vs_bare"`
	BareRatioMin float64 `json:"eos_vs_bare_min"`
	BareRatioMax float64 `json:"eos_vs_bare_max"`
	// BareVsBaseline is the median over rounds of bare_rps/baseline_rps:
	// the cost of exactly-once through franz-go alone.
	BareVsBaseline float64 `json:"bare_vs_baseline"`

	TxnPerSec          float64 `json:"txn_per_s"`
	BaselineCommitsSec float64 `json:"baseline_commits_per_s"`
	CommitP50Ms        float64 `json:"commit_p50_ms"`
	CommitP99Ms        float64 `json:"commit_p99_ms"`
	BaselineCommitP50  float64 `json:"baseline_commit_p50_ms"`
	BaselineCommitP99  float64 `json:"baseline_commit_p99_ms"`
	TxnP50Ms           float64 `json:"txn_p50_ms"`
	TxnP99Ms           float64 `json:"txn_p99_ms"`
	OpenP50Ms          float64 `json:"open_p50_ms"`
	BaselineOpenP50Ms  float64 `json:"baseline_open_p50_ms"`
	BareCommitsSec     float64 `json:"bare_txn_per_s"`
	BareCommitP50      float64 `json:"bare_commit_p50_ms"`
	BareCommitP99      float64 `json:"bare_commit_p99_ms"`
	BareOverhead       float64 `json:"bare_overhead_pct"`
	// OverheadPct is the share of the drain spent committing (busy);
	// LiveOverheadPct the share of the latency phase (lightly loaded).
	OverheadPct      float64 `json:"overhead_pct"`
	BaselineOverhead float64 `json:"baseline_overhead_pct"`
	LiveOverheadPct  float64 `json:"live_overhead_pct"`
	LiveCommitP50Ms  float64 `json:"live_commit_p50_ms"`
	LiveOpenP50Ms    float64 `json:"live_open_p50_ms"`

	E2EP50Ms    float64 `json:"e2e_p50_ms"`
	E2EP99Ms    float64 `json:"e2e_p99_ms"`
	E2EP99MinMs float64 `json:"e2e_p99_min_ms"`
	E2EP99MaxMs float64 `json:"e2e_p99_max_ms"`
	E2EMaxMs    float64 `json:"e2e_max_ms"`
	// E2EP999Ms is eos's p99.9 (median over rounds) and E2ESamples the
	// fewest samples of its rounds: below 10,000 the p99.9 is the max of
	// too few to mean anything, and the table says so.
	E2EP999Ms        float64 `json:"e2e_p999_ms"`
	E2ESamples       int     `json:"e2e_samples"`
	BaselineE2EP50Ms float64 `json:"baseline_e2e_p50_ms"`
	BaselineE2EP99Ms float64 `json:"baseline_e2e_p99_ms"`
	BaselineE2EMaxMs float64 `json:"baseline_e2e_max_ms"`
	BareE2EP50Ms     float64 `json:"bare_e2e_p50_ms"`
	BareE2EP99Ms     float64 `json:"bare_e2e_p99_ms"`
	BareE2EMaxMs     float64 `json:"bare_e2e_max_ms"`

	// KStreams figures are the kstreams mode's (Kafka Streams): throughput,
	// end-to-end latency, CPU and peak RSS measured as the others'. It has
	// no commit timings: Kafka Streams does not report its commits.
	KStreamsRPS    float64 `json:"kstreams_rps"`
	KStreamsRPSMin float64 `json:"kstreams_rps_min"`
	KStreamsRPSMax float64 `json:"kstreams_rps_max"`
	KStreamsMBps   float64 `json:"kstreams_mbps"`
	// EOSVsKStreams is the median over rounds of eos_rps/kstreams_rps.
	EOSVsKStreams      float64 `json:"eos_vs_kstreams"`
	EOSVsKStreamsMin   float64 `json:"eos_vs_kstreams_min"`
	EOSVsKStreamsMax   float64 `json:"eos_vs_kstreams_max"`
	KStreamsE2EP50Ms   float64 `json:"kstreams_e2e_p50_ms"`
	KStreamsE2EP99Ms   float64 `json:"kstreams_e2e_p99_ms"`
	KStreamsE2EMaxMs   float64 `json:"kstreams_e2e_max_ms"`
	KStreamsCPUSecPerM float64 `json:"kstreams_cpu_s_per_m"`
	KStreamsPeakRSSMiB float64 `json:"kstreams_peak_rss_mib"`

	// EOSNoPreagg figures are the eos-nopreagg mode's (the aggregate
	// without pre-aggregation). EOSNoPreaggVsKStreams is the median over
	// rounds of its rps over kstreams': the engines on the same algorithm;
	// EOSVsNoPreagg, of eos's over its: what the combiner is worth.
	EOSNoPreaggRPS        float64 `json:"eos_nopreagg_rps"`
	EOSNoPreaggRPSMin     float64 `json:"eos_nopreagg_rps_min"`
	EOSNoPreaggRPSMax     float64 `json:"eos_nopreagg_rps_max"`
	EOSNoPreaggVsKStreams float64 `json:"eos_nopreagg_vs_kstreams"`
	EOSVsNoPreagg         float64 `json:"eos_vs_eos_nopreagg"`
	EOSNoPreaggCPUSecPerM float64 `json:"eos_nopreagg_cpu_s_per_m"`
	EOSNoPreaggPeakRSSMiB float64 `json:"eos_nopreagg_peak_rss_mib"`

	EOSCPUSecPerM      float64 `json:"eos_cpu_s_per_m"`
	BaselineCPUSecPerM float64 `json:"baseline_cpu_s_per_m"`
	EOSPeakRSSMiB      float64 `json:"eos_peak_rss_mib"`
	BaselinePeakRSSMiB float64 `json:"baseline_peak_rss_mib"`
	BareCPUSecPerM     float64 `json:"bare_cpu_s_per_m"`
	BarePeakRSSMiB     float64 `json:"bare_peak_rss_mib"`

	Aborted int `json:"aborted"`
	Reinits int `json:"reinits"`

	Runs []RunResult `json:"runs"`
}

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
	c := Cell{Interval: interval, Size: size, Records: records, Runs: runs}
	pick := func(m Mode, f func(RunResult) float64) []float64 {
		var xs []float64
		for _, r := range runs {
			if r.Mode == m {
				xs = append(xs, f(r))
			}
		}
		return xs
	}
	med := func(m Mode, f func(RunResult) float64) float64 { return median(pick(m, f)) }
	rps := func(r RunResult) float64 { return r.RPS }
	base, bare, eos, ks := pick(ModeBaseline, rps), pick(ModeBare, rps), pick(ModeEOS, rps), pick(ModeKStreams, rps)
	for _, xs := range [][]float64{base, bare, eos, ks, pick(ModeEOSNoPreagg, rps)} {
		if len(xs) > 0 && (c.Rounds == 0 || len(xs) < c.Rounds) {
			c.Rounds = len(xs)
		}
	}
	c.BaselineRPS, c.BaselineRPSMin, c.BaselineRPSMax = median(base), minOf(base), maxOf(base)
	c.BareRPS, c.BareRPSMin, c.BareRPSMax = median(bare), minOf(bare), maxOf(bare)
	c.EOSRPS, c.EOSRPSMin, c.EOSRPSMax = median(eos), minOf(eos), maxOf(eos)
	c.BaselineMBps = med(ModeBaseline, func(r RunResult) float64 { return r.MBps })
	c.BareMBps = med(ModeBare, func(r RunResult) float64 { return r.MBps })
	c.EOSMBps = med(ModeEOS, func(r RunResult) float64 { return r.MBps })

	ratios := roundRatios(runs, ModeEOS, ModeBaseline)
	c.Ratio, c.RatioMin, c.RatioMax = median(ratios), minOf(ratios), maxOf(ratios)
	if len(ratios) > 0 {
		c.LossPct = (1 - c.Ratio) * 100
	}
	bareRatios := roundRatios(runs, ModeEOS, ModeBare)
	c.BareRatio, c.BareRatioMin, c.BareRatioMax = median(bareRatios), minOf(bareRatios), maxOf(bareRatios)
	c.BareVsBaseline = median(roundRatios(runs, ModeBare, ModeBaseline))
	c.BareCommitsSec = med(ModeBare, func(r RunResult) float64 { return r.TxnPerSec })
	c.BareCommitP50 = med(ModeBare, func(r RunResult) float64 { return r.CommitP50Ms })
	c.BareCommitP99 = med(ModeBare, func(r RunResult) float64 { return r.CommitP99Ms })
	c.BareOverhead = med(ModeBare, func(r RunResult) float64 { return r.OverheadPct })
	c.BareE2EP50Ms = med(ModeBare, func(r RunResult) float64 { return r.E2EP50Ms })
	c.BareE2EP99Ms = med(ModeBare, func(r RunResult) float64 { return r.E2EP99Ms })
	c.BareE2EMaxMs = maxOf(pick(ModeBare, func(r RunResult) float64 { return r.E2EMaxMs }))
	c.BareCPUSecPerM = med(ModeBare, func(r RunResult) float64 { return r.CPUSecPerM })
	c.BarePeakRSSMiB = maxOf(pick(ModeBare, func(r RunResult) float64 { return r.PeakRSSMiB }))

	c.TxnPerSec = med(ModeEOS, func(r RunResult) float64 { return r.TxnPerSec })
	c.BaselineCommitsSec = med(ModeBaseline, func(r RunResult) float64 { return r.TxnPerSec })
	c.CommitP50Ms = med(ModeEOS, func(r RunResult) float64 { return r.CommitP50Ms })
	c.CommitP99Ms = med(ModeEOS, func(r RunResult) float64 { return r.CommitP99Ms })
	c.BaselineCommitP50 = med(ModeBaseline, func(r RunResult) float64 { return r.CommitP50Ms })
	c.BaselineCommitP99 = med(ModeBaseline, func(r RunResult) float64 { return r.CommitP99Ms })
	c.TxnP50Ms = med(ModeEOS, func(r RunResult) float64 { return r.TxnP50Ms })
	c.TxnP99Ms = med(ModeEOS, func(r RunResult) float64 { return r.TxnP99Ms })
	c.OpenP50Ms = med(ModeEOS, func(r RunResult) float64 { return r.OpenP50Ms })
	c.BaselineOpenP50Ms = med(ModeBaseline, func(r RunResult) float64 { return r.OpenP50Ms })
	c.OverheadPct = med(ModeEOS, func(r RunResult) float64 { return r.OverheadPct })
	c.BaselineOverhead = med(ModeBaseline, func(r RunResult) float64 { return r.OverheadPct })
	c.LiveOverheadPct = med(ModeEOS, func(r RunResult) float64 { return r.LiveOverheadPct })
	c.LiveCommitP50Ms = med(ModeEOS, func(r RunResult) float64 { return r.LiveCommitP50Ms })
	c.LiveOpenP50Ms = med(ModeEOS, func(r RunResult) float64 { return r.LiveOpenP50Ms })

	c.E2EP50Ms = med(ModeEOS, func(r RunResult) float64 { return r.E2EP50Ms })
	p99 := pick(ModeEOS, func(r RunResult) float64 { return r.E2EP99Ms })
	c.E2EP99Ms, c.E2EP99MinMs, c.E2EP99MaxMs = median(p99), minOf(p99), maxOf(p99)
	c.E2EMaxMs = maxOf(pick(ModeEOS, func(r RunResult) float64 { return r.E2EMaxMs }))
	c.E2EP999Ms = med(ModeEOS, func(r RunResult) float64 { return r.E2EP999Ms })
	c.E2ESamples = int(minOf(pick(ModeEOS, func(r RunResult) float64 { return float64(r.E2ESamples) })))
	c.BaselineE2EP50Ms = med(ModeBaseline, func(r RunResult) float64 { return r.E2EP50Ms })
	c.BaselineE2EP99Ms = med(ModeBaseline, func(r RunResult) float64 { return r.E2EP99Ms })
	c.BaselineE2EMaxMs = maxOf(pick(ModeBaseline, func(r RunResult) float64 { return r.E2EMaxMs }))

	c.KStreamsRPS, c.KStreamsRPSMin, c.KStreamsRPSMax = median(ks), minOf(ks), maxOf(ks)
	c.KStreamsMBps = med(ModeKStreams, func(r RunResult) float64 { return r.MBps })
	ksRatios := roundRatios(runs, ModeEOS, ModeKStreams)
	c.EOSVsKStreams, c.EOSVsKStreamsMin, c.EOSVsKStreamsMax = median(ksRatios), minOf(ksRatios), maxOf(ksRatios)
	c.KStreamsE2EP50Ms = med(ModeKStreams, func(r RunResult) float64 { return r.E2EP50Ms })
	c.KStreamsE2EP99Ms = med(ModeKStreams, func(r RunResult) float64 { return r.E2EP99Ms })
	c.KStreamsE2EMaxMs = maxOf(pick(ModeKStreams, func(r RunResult) float64 { return r.E2EMaxMs }))
	c.KStreamsCPUSecPerM = med(ModeKStreams, func(r RunResult) float64 { return r.CPUSecPerM })
	c.KStreamsPeakRSSMiB = maxOf(pick(ModeKStreams, func(r RunResult) float64 { return r.PeakRSSMiB }))

	np := pick(ModeEOSNoPreagg, rps)
	c.EOSNoPreaggRPS, c.EOSNoPreaggRPSMin, c.EOSNoPreaggRPSMax = median(np), minOf(np), maxOf(np)
	c.EOSNoPreaggVsKStreams = median(roundRatios(runs, ModeEOSNoPreagg, ModeKStreams))
	c.EOSVsNoPreagg = median(roundRatios(runs, ModeEOS, ModeEOSNoPreagg))
	c.EOSNoPreaggCPUSecPerM = med(ModeEOSNoPreagg, func(r RunResult) float64 { return r.CPUSecPerM })
	c.EOSNoPreaggPeakRSSMiB = maxOf(pick(ModeEOSNoPreagg, func(r RunResult) float64 { return r.PeakRSSMiB }))

	c.EOSCPUSecPerM = med(ModeEOS, func(r RunResult) float64 { return r.CPUSecPerM })
	c.BaselineCPUSecPerM = med(ModeBaseline, func(r RunResult) float64 { return r.CPUSecPerM })
	c.EOSPeakRSSMiB = maxOf(pick(ModeEOS, func(r RunResult) float64 { return r.PeakRSSMiB }))
	c.BaselinePeakRSSMiB = maxOf(pick(ModeBaseline, func(r RunResult) float64 { return r.PeakRSSMiB }))
	for _, r := range runs {
		c.Aborted += r.Aborted
		c.Reinits += r.Reinits
	}
	return c
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
		ch := AutoCheck{Size: a.Size, BudgetPct: budget * 100, LiveOverheadPct: a.LiveOverheadPct, DrainOverheadPct: a.OverheadPct,
			LiveOpenP50Ms: a.LiveOpenP50Ms, DrainOpenP50Ms: a.OpenP50Ms, E2EP99Ms: a.E2EP99Ms}
		ch.WithinOnePoint = math.Abs(a.LiveOverheadPct-budget*100) <= 1
		best := time.Duration(math.MaxInt64)
		for _, f := range cells {
			d, err := time.ParseDuration(f.Interval)
			if err != nil || f.Size != a.Size || f.LiveOverheadPct > budget*100 || d >= best {
				continue
			}
			best, ch.BestFixed, ch.BestE2EP99Ms = d, f.Interval, f.E2EP99Ms
		}
		if ch.BestFixed != "" && ch.BestE2EP99Ms > 0 {
			ch.LatencyVsBest = a.E2EP99Ms / ch.BestE2EP99Ms
			ch.WithinTwiceBest = ch.LatencyVsBest <= 2
		}
		out = append(out, ch)
	}
	return out
}
