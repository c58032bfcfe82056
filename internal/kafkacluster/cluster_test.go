package kafkacluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A 3-node cluster starts with the exactly-once settings, its proxies drop
// exactly the responses they are armed to drop (after Kafka applied the
// request), and a node killed with SIGKILL comes back on its own storage.
func TestClusterServesThroughProxiesAndSurvivesANodeKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Apache Kafka (about 20 s); runs without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Proxy: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, -1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	cfgs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2", "min.insync.replicas": "2", "default.replication.factor": "3"}
	for _, rc := range cfgs {
		for _, kv := range rc.Configs {
			if w, ok := want[kv.Key]; ok && kv.MaybeValue() == w {
				delete(want, kv.Key)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("broker 1 lacks the exactly-once settings %v", want)
	}

	// Arm one CreateTopics response to be dropped: Kafka creates the topic,
	// the client never hears so.
	key := kmsg.CreateTopics.Int16()
	c.Faults().DropResponses(key, 1)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Second)
	adm.CreateTopic(short, 1, -1, nil, "dropped")
	cancelShort()
	if got := c.Faults().Dropped(key); got != 1 {
		t.Fatalf("dropped %d CreateTopics responses, want 1", got)
	}
	// The controller created it; the brokers learn of it one after another.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ts, err := adm.ListTopics(ctx, "dropped")
		if err == nil && ts.Has("dropped") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the topic whose creation answer was dropped does not exist 20s later: %v", err)
		}
	}

	if err := c.StopNode(2, true); err != nil {
		t.Fatal(err)
	}
	if !c.Node(2).Exited() {
		t.Fatal("node 2 still runs after SIGKILL")
	}
	if err := c.RestartNode(ctx, 2); err != nil {
		t.Fatal(err)
	}
}

// A detached cluster leaves a state file that Status reads and StopDir
// uses to stop the nodes by PID; without one, both say no cluster runs.
func TestDetachedClusterIsStoppedByPID(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Apache Kafka (about 10 s); runs without -short")
	}
	dir := t.TempDir()
	if _, _, err := Status(dir); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Status of an empty dir: %v, want ErrNotRunning", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Nodes: 1, Dir: dir, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Nodes()[0].PID()
	_, nodes, err := Status(dir)
	if err != nil || len(nodes) != 1 || !nodes[0].Running || nodes[0].PID != pid {
		t.Fatalf("Status: %+v, %v; want node 1 running as pid %d", nodes, err, pid)
	}
	if err := StopDir(dir, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil && !processGone(pid) {
		t.Fatalf("pid %d still runs after StopDir", pid)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); !os.IsNotExist(err) {
		t.Fatalf("StopDir left %s behind", stateFile)
	}
}

// A port taken before a node binds it: one the caller gave (Config.Ports)
// fails the start naming the port and Kafka's own log line; one the
// launcher chose (here the CONTROLLER port, beside a given CLIENT port) is
// chosen again and the cluster starts.
func TestATakenPortIsNamedOrChosenAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Apache Kafka (a 1-node cluster, three times); runs without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	hold := func(port int) {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	given, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	hold(given)
	_, err = Start(ctx, Config{Nodes: 1, Ports: []int{given}, Heap: "256m", Logf: t.Logf})
	var taken *PortTakenError
	if !errors.As(err, &taken) || !taken.Given || taken.Port != given || !strings.Contains(taken.Line, "Address already in use") {
		t.Fatalf("start on a taken given port: %v; want a PortTakenError naming port %d and the log line", err, given)
	}

	client, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	held := false
	c, err := Start(ctx, Config{Nodes: 1, Ports: []int{client}, Heap: "256m",
		Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)); t.Logf(f, a...) },
		afterLayout: func(c *Cluster) {
			if !held {
				held = true
				hold(c.nodes[0].controllerPort)
			}
		}})
	if err != nil {
		t.Fatalf("start with a taken CONTROLLER port: %v; want it chosen again", err)
	}
	defer c.Stop()
	if !strings.Contains(strings.Join(logs, "\n"), "starting again on new ports") || c.Addrs()[0] != net.JoinHostPort("127.0.0.1", strconv.Itoa(client)) {
		t.Fatalf("the start did not go again on new ports keeping the client port %d: %v, logs %q", client, c.Addrs(), logs)
	}
}
