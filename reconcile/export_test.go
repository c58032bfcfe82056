package reconcile

// WithBucketRecords returns cfg with spill buckets of n records, so that a
// test of a few thousand records spans many buckets.
func WithBucketRecords(cfg Config, n int) Config {
	cfg.bucket = n
	return cfg
}
