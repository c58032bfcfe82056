package schemaregistry

import (
	"context"
	"sync"
	"testing"
)

// StartT starts a registry of the test's own (one it may Kill and Restart)
// and kills it when the test ends; a registry that cannot start fails t.
func StartT(t testing.TB) *Registry {
	t.Helper()
	r, err := Start(context.Background(), Config{Dir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting a schema registry: %v", err)
	}
	t.Cleanup(r.Kill)
	return r
}

var shared struct {
	once sync.Once
	r    *Registry
	err  error
}

// Shared returns the test binary's one registry, started on first use, for
// tests that only register and read schemas (each under its own subjects);
// it dies with the test binary.
func Shared(t testing.TB) *Registry {
	t.Helper()
	shared.once.Do(func() {
		shared.r, shared.err = Start(context.Background(), Config{})
	})
	if shared.err != nil {
		t.Fatalf("starting the shared schema registry: %v", shared.err)
	}
	return shared.r
}
