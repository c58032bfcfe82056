package idempotency

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// partitionName is the partition of table holding day (YYYY-MM-DD).
func partitionName(table, day string) string {
	return table + "_p" + strings.ReplaceAll(day, "-", "")
}

func nextDay(day string) string {
	t, _ := time.Parse(time.DateOnly, day)
	return t.AddDate(0, 0, 1).Format(time.DateOnly)
}

// create creates the table if it is missing.
func (s *Store) create(ctx context.Context) error {
	today := dayOf(s.cfg.Now())
	if _, err := s.db.ExecContext(ctx, s.d.createSQL(s.cfg.Table, today, nextDay(today))); err != nil {
		return fmt.Errorf("idempotency: creating table %s: %w", s.cfg.Table, err)
	}
	return nil
}

// partitions lists the days of the table's partitions, oldest first. A
// MySQL RANGE partition holds every day below its bound; a PostgreSQL one
// only its own day.
func (s *Store) partitions(ctx context.Context) ([]string, error) {
	var q string
	if s.d == postgres {
		q = `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
			WHERE p.relname = $1 AND p.relnamespace = to_regnamespace(current_schema())::oid`
	} else {
		q = `SELECT PARTITION_NAME FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL`
	}
	rows, err := s.db.QueryContext(ctx, q, s.cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("idempotency: listing the partitions of %s: %w", s.cfg.Table, err)
	}
	defer rows.Close()
	var days []string
	prefix := s.cfg.Table + "_p"
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		if d, ok := strings.CutPrefix(name, prefix); ok && len(d) == 8 {
			days = append(days, d[:4]+"-"+d[4:6]+"-"+d[6:])
		}
	}
	slices.Sort(days)
	return days, rows.Err()
}

// ensure makes sure a partition holds day.
func (s *Store) ensure(ctx context.Context, day string) error {
	s.mu.Lock()
	ok := s.ensured[day]
	s.mu.Unlock()
	if ok {
		return nil
	}
	days, err := s.partitions(ctx)
	if err != nil {
		return err
	}
	covered := slices.Contains(days, day) || (s.d == mysql && len(days) > 0 && days[len(days)-1] >= day)
	if !covered {
		if err := s.addPartition(ctx, day); err != nil {
			// Another caller may have added it meanwhile.
			if days, lerr := s.partitions(ctx); lerr != nil || !slices.Contains(days, day) {
				return err
			}
		}
	}
	s.mu.Lock()
	s.ensured[day] = true
	s.mu.Unlock()
	return nil
}

func (s *Store) addPartition(ctx context.Context, day string) error {
	name, t := partitionName(s.cfg.Table, day), s.d.Quote(s.cfg.Table)
	var q string
	if s.d == postgres {
		q = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')", s.d.Quote(name), t, day, nextDay(day))
	} else {
		// RANGE partitions are added above the highest one only, which is
		// where a new day goes.
		q = fmt.Sprintf("ALTER TABLE %s ADD PARTITION (PARTITION %s VALUES LESS THAN ('%s'))", t, s.d.Quote(name), nextDay(day))
	}
	if _, err := s.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("idempotency: adding partition %s: %w", name, err)
	}
	return nil
}

// Maintain creates the partitions of today and the next two days, and drops
// the partitions whose every day is older than Config.Retention: whole
// partitions, never a DELETE. It returns the dropped partitions' names. Run
// it at least daily (Open runs it once).
func (s *Store) Maintain(ctx context.Context) ([]string, error) {
	now := s.cfg.Now().UTC()
	for i := range 3 {
		if err := s.ensure(ctx, dayOf(now.AddDate(0, 0, i))); err != nil {
			return nil, err
		}
	}
	cutoff := dayOf(now.Add(-s.cfg.Retention))
	days, err := s.partitions(ctx)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for i, day := range days {
		// A partition holds days < nextDay(day); drop it when they are
		// all before the cutoff. MySQL must keep one partition.
		if nextDay(day) > cutoff || (s.d == mysql && i == len(days)-1) {
			break
		}
		name := partitionName(s.cfg.Table, day)
		var q string
		if s.d == postgres {
			q = "DROP TABLE " + s.d.Quote(name)
		} else {
			q = fmt.Sprintf("ALTER TABLE %s DROP PARTITION %s", s.d.Quote(s.cfg.Table), s.d.Quote(name))
		}
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return dropped, fmt.Errorf("idempotency: dropping partition %s: %w", name, err)
		}
		s.mu.Lock()
		delete(s.ensured, day)
		s.mu.Unlock()
		dropped = append(dropped, name)
	}
	return dropped, nil
}
