package schemaregistry

import (
	"context"
	"errors"
	"testing"
)

func TestRegistryServesTheConfluentAPIAndRefusesABusyPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	r := StartT(t)
	ctx := context.Background()
	if !Ready(ctx, r.URL()) {
		t.Fatalf("%s does not answer", r.URL())
	}
	// A second registry on the same port is refused as a taken port.
	_, err := Start(ctx, Config{Port: r.cfg.Port, Dir: t.TempDir()})
	if !errors.Is(err, ErrPortTaken) {
		t.Fatalf("second start on a busy port: %v, want ErrPortTaken", err)
	}
	r.Kill()
	if Ready(ctx, r.URL()) {
		t.Fatal("killed registry still answers")
	}
	// Restart is exercised by the topologies package's registry outage
	// test, which needs the restarted registry to serve its schemas.
}
