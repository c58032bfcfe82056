// Package testenv holds what the test suites share: the split between the
// inner loop (`go test -short`, `make test-short`) and the full suite
// (`make test`, which CI runs).
package testenv

import "testing"

// Long skips t under -short: it is one of the long tests (kill loops over
// hundreds of thousands of records, fault drills, child-process demos)
// that only the full suite runs. The full suite never skips it.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("long: runs in make test (CI), not in go test -short")
	}
}
