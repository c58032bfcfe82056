package metrics

// JoinStats are the etl join's counts since the worker started
// (topologies.ETL.JoinStats converts to it).
type JoinStats struct {
	Rows, Restored, Lookups, Misses, Dropped int64
}

// WatchJoin has the exporter read the etl join's counts after every
// committed transaction, into eos_join_restored_rows_total,
// eos_join_rows, eos_join_lookups_total, eos_join_misses_total and
// eos_join_dropped_total. The counts are the table's and the lookups'
// since start, not only those of committed transactions: a record
// processed again after an abort is looked up again.
func (w *Worker) WatchJoin(read func() JoinStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.join = read
}

// exportJoin moves the join metrics to the watched counts; w.mu is held.
func (w *Worker) exportJoin() {
	if w.join == nil {
		return
	}
	s, r := w.join(), w.r
	r.counter(JoinRestoredRows).Add(float64(s.Restored - w.joinLast.Restored))
	r.gauge(JoinRows).Set(float64(s.Rows))
	r.counter(JoinLookups).Add(float64(s.Lookups - w.joinLast.Lookups))
	r.counter(JoinMisses).Add(float64(s.Misses - w.joinLast.Misses))
	r.counter(JoinDropped).Add(float64(s.Dropped - w.joinLast.Dropped))
	w.joinLast = s
}
