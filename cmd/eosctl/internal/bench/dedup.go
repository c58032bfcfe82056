package bench

import (
	"fmt"
	"os"
	"path/filepath"
)

// The dedup topology's runs are the copies' with three differences:
//
//   - Its backlog records carry their key (datagen's seq, distinct for
//     every record) in the header DedupKeyHeader too, and the eos workers run
//     dedupConfig, keyed by that header: every record passes and every
//     key is still held when the drain ends, the gate's worst case for
//     memory, so --records sets the keys held (10,000,000 for the figure
//     BENCHMARKS.md quotes).
//   - The judge is the copy's, verify.Run: a record is a key, so "every
//     distinct key exactly once, in input order per partition, nothing
//     else" is verify's copy verdict. (The chaos suite's dedup-kills drill
//     is the one whose input repeats keys; here a repeat would only
//     lower the work per record.)
//   - A worker with state reads one input, so there is no second, live
//     input and no latency phase: the e2e cells are "-".
//
// Only the eos mode runs it: the copy loops keep no state, and there is no
// Kafka Streams peer for it.

// topologyDedup is the topology these runs are for.
const topologyDedup = "dedup"

// DedupKeyHeader carries each backlog record's key, the dedup key. A
// passthrough run beside a dedup run (Config.KeyHeader) carries it too, so
// that both drain records of the same shape.
const DedupKeyHeader = "event-id"

// dedupConfig is the eos workers' configuration: a retention no run
// outlasts, so no key expires during the drain.
const dedupConfig = "topology: dedup\nkey: {header: " + DedupKeyHeader + "}\nretention: 24h\n"

// writeDedupConfig writes dedupConfig into dir, for the workers' --config.
func writeDedupConfig(dir string) (string, error) {
	path := filepath.Join(dir, "dedup.yaml")
	if err := os.WriteFile(path, []byte(dedupConfig), 0o644); err != nil {
		return "", fmt.Errorf("bench: writing the dedup configuration: %w", err)
	}
	return path, nil
}

// noLatencyPhase reports whether topology's runs have no latency phase
// (aggregate.go and the above say why).
func noLatencyPhase(topology string) bool {
	return topology == topologyAggregate || topology == topologyDedup || topology == topologyJoin || topology == topologyETL
}

// keyHeader is the header the backlog's records carry their key in, if
// any.
func (b *bencher) keyHeader() string { return b.cfg.KeyHeader }
