package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
