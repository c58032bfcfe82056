// Package e2e holds the end-to-end tests of eos: real eosctl worker
// processes, killed by real signals, talking the Kafka protocol over TCP to
// an embedded broker that runs in the test process (so that the tests can
// inject faults into it). Every test judges exactly-once the same way: with
// verify.Run reading the output with read_committed after the faults, and a
// verify.Tail reading it concurrently during them. The tests' env is a
// testing adapter over package fleet, the environment the chaos scenarios
// run in too.
package e2e
