package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eosctl/eos/internal/kafkacluster"
)

// The launcher's help lists every flag with its default, on stdout with
// exit 0 when asked for (it once printed "Flags:" and nothing under it);
// with no command it prints the same on stderr and exits 2.
func TestHelpListsTheFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kafka")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"start", "--help"}, {}} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		help := stdout.String()
		wantCode := 0
		switch {
		case len(args) == 0:
			help, wantCode = stderr.String(), 2
		case args[0] == "start":
			help = stderr.String() // the flag package's -h: its output, exit 0
		}
		if code != wantCode {
			t.Errorf("kafka %v: exit %d (%v), want %d", args, code, err, wantCode)
		}
		for _, flag := range []string{"-nodes", "-ports", "-version", "-heap", "-dir", "-config", `(default "4.4.0")`} {
			if !strings.Contains(help, flag) {
				t.Errorf("kafka %v: the help does not list %s:\n%s", args, flag, help)
			}
		}
	}
}

// A start that fails shows every line of its error (a node's log tail
// follows "its log ends:"; the launcher once printed only the first line),
// and a taken port that --ports gave is told in flag terms, with the
// ephemeral range to stay below.
func TestErrorsShowTheLogTailAndTakenPortsInFlagTerms(t *testing.T) {
	tail := errors.New("kafkacluster: node 1 exited while starting; its log (/x/server.log) ends:\n[2026] ERROR boom\n[2026] INFO shut down")
	if got := describe(tail); got != tail.Error() {
		t.Errorf("describe(%q) = %q, want every line", tail, got)
	}
	taken := &kafkacluster.PortTakenError{Node: 1, Port: 39192, Given: true, Ephemeral: [2]int{32768, 60999},
		Line: "org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:39192: Address already in use.", Log: "/x/node-1/server.log"}
	got := describe(fmt.Errorf("wrapped: %w", taken))
	for _, want := range []string{"port 39192, which --ports gave it", "Address already in use", "/x/node-1/server.log", "below 32768", "ephemeral range"} {
		if !strings.Contains(got, want) {
			t.Errorf("describe(taken port) = %q, want it to say %q", got, want)
		}
	}
}
