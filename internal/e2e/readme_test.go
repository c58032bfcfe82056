package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock returns the first ```sh block after the README heading.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no heading %q", heading)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("README: no sh block after %q", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// commands returns the command lines of a shell block, without comments
// and indentation.
func commands(block string) []string {
	var out []string
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// The README's "Step by step" works as written: its commands, run by bash
// with eosctl on the PATH (the broker on a free port instead of 9092, and
// no EOSCTL_METRICS_ADDR, so both workers want the default metrics port),
// end with verify passing, and no command fails along the way. The root
// help's example is the same walk-through.
func TestReadmeStepByStep(t *testing.T) {
	block := readmeBlock(t, "## Step by step")
	help := exec.Command(eosctl, "--help")
	out, err := help.Output()
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(out), "# or step by step")
	example, _, _ = strings.Cut(example, "\n\n")
	_, example, _ = strings.Cut(example, "\n")
	if got, want := strings.Join(commands(example), "\n"), strings.Join(commands(block), "\n"); got != want {
		t.Errorf("eosctl --help's step by step:\n%s\nthe README's:\n%s", got, want)
	}

	listen := freeAddr(t)
	script := strings.ReplaceAll(block, "eosctl broker ", "eosctl broker --listen "+listen+" ")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EOSCTL_") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(eosctl)+":"+os.Getenv("PATH"), "EOSCTL_BROKERS="+listen)
	// Files, not pipes: the walk-through leaves its broker and workers
	// running, holding its stdout and stderr open after bash exits.
	stdout, stderr := outFile(t, "stdout"), outFile(t, "stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Start()
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		time.Sleep(time.Second)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
	err = cmd.Wait()
	sout, serr := readFile(t, stdout.Name()), readFile(t, stderr.Name())
	if err != nil || !strings.Contains(sout, "verify in -> out: OK: 1000000 input records") {
		t.Fatalf("the walk-through failed: %v\nstdout:\n%s\nstderr:\n%s", err, sout, serr)
	}
	for _, line := range strings.Split(serr, "\n") {
		if strings.HasPrefix(line, "eosctl: ") {
			t.Errorf("a command of the walk-through failed: %s", line)
		}
	}
	if !strings.Contains(serr, "serving metrics on a free port instead") {
		t.Errorf("no worker said it serves its metrics on a free port:\n%s", serr)
	}
}

func outFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
