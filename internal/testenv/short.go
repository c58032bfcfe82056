// Package testenv holds the testing helpers the test suites share: the
// split between the inner loop (`go test -short`, `make test-short`) and
// the full suite (`make test`, which CI runs), and the polls of a condition
// and of an HTTP endpoint. The environment the e2e tests and the chaos
// scenarios run workers in is package fleet, which does not import testing.
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
