// Package docs holds the tests that keep README.md and docs/*.md true: every
// command block in them runs as written against an embedded broker, and
// every relative link resolves.
package docs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/internal/eosctltest"
	"github.com/eosctl/eos/internal/testenv"
)

// eosctl is the binary under test, built once by TestMain.
var eosctl string

func TestMain(m *testing.M) {
	bin, cleanup, err := eosctltest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	eosctl = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// blockTimeout bounds one block; the slowest (the README's walk-through,
// 1,000,000 records copied by two workers) takes a few seconds.
const blockTimeout = 90 * time.Second

// buildCommand finds a block that runs the go command or make.
var buildCommand = regexp.MustCompile(`(^|[\s;&|(])(go|make) `)

// brokerCommand finds a block that starts its own embedded broker.
var brokerCommand = regexp.MustCompile(`(^|[\s;&|(])eosctl broker `)

// registryCommand finds a block that runs the Schema Registry launcher.
var registryCommand = regexp.MustCompile(`scripts/registry (start|stop|status|env)`)

// withRegistry points a block's scripts/registry commands at a port and a
// directory of the block's own (a free port instead of 8081, so that blocks
// run side by side and beside a registry the user runs), and stops the
// registry when the test ends whatever the block did: the launcher detaches
// it from the block's process group.
func withRegistry(t *testing.T, root, script string) string {
	port, err := broker.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := strings.Cut(port, ":")
	dir := t.TempDir()
	t.Cleanup(func() {
		_ = exec.Command(filepath.Join(root, "scripts", "registry"), "stop", "--dir", dir).Run()
	})
	return registryCommand.ReplaceAllString(script, "scripts/registry $1 --port "+p+" --dir "+dir)
}

// TestEveryCommandBlockInTheDocsRuns runs every shell block of README.md and
// docs/*.md as written, each in a bash of its own with the eosctl under test
// first on the PATH, against an embedded broker of its own: the one the
// block starts (`eosctl broker`, moved to a free port), or one the test
// starts and names in EOSCTL_BROKERS; a block that runs scripts/registry
// gets a Schema Registry of its own (a free port, its own directory); a block that names EOS_TEST_POSTGRES
// gets it set to a fresh database on a real PostgreSQL. A block fails when bash exits non-zero,
// when anything it started (a background worker too) printed an "eosctl: "
// error it does not show, or when it runs past blockTimeout; the failure
// names FILE:LINE of the block. Blocks marked <!-- no-test: REASON --> (they
// need Apache Kafka, Docker, a database, or are `make test` itself) are
// counted and logged, not run. A block that is not a shell block but holds
// "$ " command lines fails: a transcript must be ```console to be run.
func TestEveryCommandBlockInTheDocsRuns(t *testing.T) {
	testenv.Long(t) // 40-60s on 2 cores, the README's million-record quickstart most of it
	root := repoRoot(t)
	blocks, err := allBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var (
		ran     atomic.Int32
		skipped int
	)
	// Blocks run concurrently, at most parallelBlocks at a time: most of a
	// block's time is waiting (for a worker to catch up, for what it left
	// running to stop), not computing.
	sem := make(chan struct{}, parallelBlocks)
	t.Run("blocks", func(t *testing.T) {
		for _, b := range blocks {
			if !b.shell() {
				for _, line := range b.body {
					if strings.HasPrefix(line, "$ ") && b.noTest == "" {
						t.Errorf("%s: a ```%s block shows a command (%q) that nothing runs: make it ```console, or mark it <!-- no-test: REASON -->", b, b.lang, line)
						break
					}
				}
				continue
			}
			if b.noTest != "" {
				skipped++
				t.Logf("%s: not run: %s", b, b.noTest)
				continue
			}
			t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				ran.Add(1)
				runBlock(t, root, filepath.Dir(eosctl), b)
			})
		}
	})
	t.Logf("ran %d shell blocks in %s; %d marked no-test", ran.Load(), time.Since(start).Round(time.Millisecond), skipped)
	if ran.Load() == 0 {
		t.Error("no shell block ran")
	}
}

// parallelBlocks is how many blocks run at once.
const parallelBlocks = 3

// walkThroughHeading is the README section whose block eosctl --help repeats.
const walkThroughHeading = "## Walk-through: copy 100,000 records exactly once"

// runBlock runs one block and reports its failures under its FILE:LINE.
func runBlock(t *testing.T, root, binDir string, b block) {
	script, expected := b.script()
	var addr string
	if brokerCommand.MatchString(script) {
		a, err := broker.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addr = a
		script = strings.ReplaceAll(script, "eosctl broker ", "eosctl broker --listen "+addr+" ")
	} else {
		br, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
		if err != nil {
			t.Fatalf("%s: starting a broker: %v", b, err)
		}
		defer br.Close()
		addr = br.Addrs()[0]
	}

	// Blocks run in a directory of their own whose entries link to the
	// repository's (topologies/examples/... resolve, files they write stay
	// out of the repository), except those that run go or make, which run
	// in the repository: Go's build cache is keyed by the source directory,
	// and a fresh one would recompile every package of the module.
	dir := t.TempDir()
	if registryCommand.MatchString(script) {
		script = withRegistry(t, root, script)
	}
	if buildCommand.MatchString(script) || registryCommand.MatchString(script) {
		// scripts/registry builds its launcher with go.
		dir = root
	} else {
		linkEntries(t, root, dir)
	}

	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EOSCTL_") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "EOSCTL_BROKERS="+addr)
	if strings.Contains(script, "EOS_TEST_POSTGRES") {
		// A block that writes to PostgreSQL gets a database of its own on
		// the real server (internal/dbtest; scripts/db starts it if needed).
		cmd.Env = append(cmd.Env, "EOS_TEST_POSTGRES="+dbtest.Fresh(t, dbtest.Postgres))
	}
	// Files, not pipes: background workers and brokers outlive bash and
	// hold its stdout and stderr open.
	stdout, stderr := outFile(t, "stdout"), outFile(t, "stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	err := cmd.Wait()
	took := time.Since(began)
	// What the block's commands printed, read before its background
	// processes are stopped (a stop is not theirs to report).
	sout, serr := readFile(t, stdout.Name()), readFile(t, stderr.Name())
	stopGroup(cmd.Process.Pid)
	report := func(format string, args ...any) {
		t.Errorf("%s (under %q): %s\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", b, b.heading, fmt.Sprintf(format, args...), script, tail(sout), tail(serr))
	}
	switch {
	case ctx.Err() != nil:
		report("still running after %s", blockTimeout)
		return
	case err != nil:
		report("bash: %v", err)
		return
	}
	got := map[string]bool{}
	for _, line := range strings.Split(serr, "\n") {
		if !strings.HasPrefix(line, "eosctl: ") {
			continue
		}
		got[line] = true
		if !slices.Contains(expected, line) {
			report("a command failed: %s", line)
		}
	}
	for _, line := range expected {
		if !got[line] {
			report("the block shows the error %q, which no command printed", line)
		}
	}
	if b.file == "README.md" && b.heading == walkThroughHeading && !strings.Contains(serr, "serving metrics on a free port instead") {
		report("no worker said it serves its metrics on a free port (two workers on one host share the default port)")
	}
	if !t.Failed() {
		t.Logf("%s: ok in %s", b, took.Round(time.Millisecond))
	}
}

// stopGroup stops what a block left running: SIGTERM (workers commit and
// leave their group, brokers save their state), then SIGKILL after 5s.
func stopGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// linkEntries makes dir look like the repository: a symbolic link to each
// of its top-level entries, except build output and broker data.
func linkEntries(t *testing.T, root, dir string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".git", ".eosctl", "bin":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// repoRoot is the repository's root: this package's parent directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// tail keeps the last 60 lines of s.
func tail(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 60 {
		lines = append([]string{"..."}, lines[len(lines)-60:]...)
	}
	return strings.Join(lines, "\n")
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
