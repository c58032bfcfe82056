package kafkacluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Kafka can write hundreds of lines (its shutdown, config dumps) after
// the line saying a port was taken, before the JVM exits: the whole log of
// the node's current start is searched, not its tail, and an earlier
// start's failure in the same (appended) log is not taken for this one's.
func TestABindFailureFarFromTheLogsEndIsFound(t *testing.T) {
	dir := t.TempDir()
	exited := make(chan struct{})
	close(exited) // the JVM has exited
	n := &Node{ID: 1, dir: dir, exited: exited}
	bind := func(port string) string {
		return "org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:" + port + ": Address already in use.\n"
	}
	filler := strings.Repeat("\tsome.setting = value\n", 500)
	// An earlier start of the node failed on port 1111, then started.
	if err := os.WriteFile(n.LogPath(), []byte(bind("1111")+filler), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stdout.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{cfg: Config{Ports: []int{2222}}, nodes: []*Node{n}}
	n.logFrom = [2]int64{0, fileSize(n.LogPath())}
	var taken *PortTakenError
	if err := c.WaitReady(context.Background(), time.Second); err == nil || errors.As(err, &taken) {
		t.Fatalf("an earlier start's bind failure taken for this start's: %v", err)
	}
	// This start fails on port 2222, 500 lines before the log's end.
	f, err := os.OpenFile(n.LogPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(filler + bind("2222") + filler)
	f.Close()
	err = c.WaitReady(context.Background(), time.Second)
	if !errors.As(err, &taken) || taken.Port != 2222 || !taken.Given {
		t.Fatalf("bind failure 500 lines before the end: %v; want a PortTakenError naming port 2222, given", err)
	}
}
