package sink

import (
	"context"
	"fmt"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/kgo"
)

// WriteRecords writes recs as rows of m's table through the sink's
// idempotent path (the same INSERT ... ON CONFLICT (key) DO NOTHING / ON
// DUPLICATE KEY UPDATE k=k, or upsert), in one transaction, without
// touching any offsets: a record whose row exists is absorbed, so running
// it twice is safe. Reconciliation repairs missing rows with it. It returns
// the rows written; a record that does not map is an error.
func WriteRecords(ctx context.Context, db *DB, m *Mapping, recs []*kgo.Record) (int, error) {
	if m.Mode == ModeTransition {
		return 0, eos.BadConfig("sink.Config", "Mapping: mode transition rows cannot be re-sent, only inserted or upserted ones")
	}
	s := &Sink{cfg: Config{Mapping: m}, db: db}
	s.cols = append([]string{m.KeyColumn}, columnNames(m)...)
	if err := s.conflictTarget(ctx); err != nil {
		return 0, err
	}
	items := make([]item, len(recs))
	good := make([]*item, len(recs))
	for i, r := range recs {
		row, err := m.mapRecord(r)
		if err != nil {
			return 0, fmt.Errorf("record %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		items[i] = item{rec: r, row: row}
		good[i] = &items[i]
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var out outcome
	if err := s.insertAll(ctx, tx, good, &out); err != nil {
		return 0, err
	}
	return out.rows, tx.Commit()
}
