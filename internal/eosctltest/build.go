// Package eosctltest builds the eosctl binary for tests that run it as real
// processes.
package eosctltest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles eosctl into a temporary directory and returns its path and
// a function that removes it. Workers started from tests serve no metrics
// unless a test asks for them (EOSCTL_METRICS_ADDR is set empty in this
// process's environment, which child processes inherit): many run at once,
// and the default port would collide.
func Build() (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "eosctl-test-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "eosctl")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/eosctl/eos/cmd/eosctl")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building eosctl: %w", err)
	}
	os.Setenv("EOSCTL_METRICS_ADDR", "")
	return bin, func() { os.RemoveAll(dir) }, nil
}
