package broker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain doubles as a broker process: with EOS_TEST_BROKER set to
// "DIR ADDR RAW" it runs a broker on that data directory and port until it
// is killed, so that tests can SIGKILL a real process.
func TestMain(m *testing.M) {
	if spec := os.Getenv("EOS_TEST_BROKER"); spec != "" {
		var dir, addr string
		var raw bool
		if _, err := fmt.Sscan(spec, &dir, &addr, &raw); err != nil {
			fmt.Fprintln(os.Stderr, "EOS_TEST_BROKER:", err)
			os.Exit(2)
		}
		b, err := Start(Config{DataDir: dir, SyncWrites: true, Listen: addr, RawCrashRecovery: raw})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("ready")
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		b.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// brokerProc is a broker in a child process.
type brokerProc struct {
	t         *testing.T
	dir, addr string
	raw       bool
	cmd       *exec.Cmd
}

func (p *brokerProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(os.Args[0], "-test.run", "^$")
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("EOS_TEST_BROKER=%s %s %v", p.dir, p.addr, p.raw))
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		p.t.Fatalf("broker process did not start: %q %v", buf, err)
	}
}

// kill SIGKILLs the broker and waits for it to die.
func (p *brokerProc) kill() {
	p.t.Helper()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// crashAndResume has transactional id "tx" commit c1, leave x2 in an open
// transaction (acknowledged by the broker), then SIGKILLs the broker,
// restarts it, commits c3 and c4 with a new incarnation of "tx", and
// returns what read_committed shows then, and after a second SIGKILL and
// restart.
func crashAndResume(t *testing.T, raw bool) (afterOne, afterTwo []string) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := &brokerProc{t: t, dir: t.TempDir(), addr: addr, raw: raw}
	p.start()
	defer func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	produce := func(values []string, commit bool) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for _, v := range values {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	read := func() []string {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var got []string
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		for pctx.Err() == nil {
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return got
	}

	admin, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	_, err = kadm.NewClient(admin).CreateTopic(ctx, 1, -1, nil, "t")
	admin.Close()
	if err != nil {
		t.Fatal(err)
	}
	produce([]string{"c1"}, true)
	produce([]string{"x2"}, false) // acknowledged, never committed
	p.kill()
	p.start()
	produce([]string{"c3", "c4"}, true)
	afterOne = read()
	p.kill()
	p.start()
	return afterOne, read()
}

// kfake alone loses committed data after a crash that interrupted a
// transaction: no ABORT marker ends the interrupted transaction, so
// read_committed readers skip the producer's later commits; a second crash
// brings the aborted record back. If this starts to fail, kfake has fixed
// its crash recovery and recover.go can go.
func TestRawCrashRecoveryHidesCommittedRecords(t *testing.T) {
	afterOne, afterTwo := crashAndResume(t, true)
	want := []string{"c1", "c3", "c4"}
	if slices.Equal(afterOne, want) && slices.Equal(afterTwo, want) {
		t.Fatalf("kfake recovered exactly (%v, then %v): has it fixed its crash recovery? Then recover.go can go", afterOne, afterTwo)
	}
	t.Logf("without recovery: read_committed shows %v after the first crash and %v after the second; want %v", afterOne, afterTwo, want)
}

// With recovery, a transaction interrupted by a crash is aborted for good
// and every commit after it is visible, through a second crash too.
func TestCrashInterruptedTransactionIsAbortedAndLaterCommitsVisible(t *testing.T) {
	afterOne, afterTwo := crashAndResume(t, false)
	want := []string{"c1", "c3", "c4"}
	if !slices.Equal(afterOne, want) || !slices.Equal(afterTwo, want) {
		t.Fatalf("read_committed shows %v after the first crash and %v after the second; want %v both times", afterOne, afterTwo, want)
	}
}
