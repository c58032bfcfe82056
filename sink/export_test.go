package sink

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Writer is the sink's write stage alone, without Kafka: what the write
// path benchmark measures.
type Writer struct{ s *Sink }

// NewWriter checks cfg and the database as New does (no Kafka client: no
// dead letters, no commits to Kafka) and owns partitions 0..partitions-1
// of topic, from the offsets stored in the database.
func NewWriter(ctx context.Context, cfg Config, topic string, partitions int32) (*Writer, error) {
	cfg.NoKafkaCommit = true
	s, err := openDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	db := s.db
	stored, err := StoredOffsets(ctx, db, s.cfg.OffsetsTable, s.cfg.Group)
	if err != nil {
		db.Close()
		return nil, err
	}
	for p := range partitions {
		s.from[tp{topic, p}] = noRow
		if o, ok := stored[topic][p]; ok {
			s.from[tp{topic, p}] = o
		}
	}
	return &Writer{s}, nil
}

// Write commits recs as one batch.
func (w *Writer) Write(ctx context.Context, recs []*kgo.Record) error { return w.s.write(ctx, recs) }

// Close closes the database.
func (w *Writer) Close() { w.s.db.Close() }
