package kafkacluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// state is what a detached cluster leaves in its directory, so that a later
// process can report on it and stop it by PID.
type state struct {
	Version string      `json:"version"`
	ID      string      `json:"cluster_id"`
	Nodes   []nodeState `json:"nodes"`
}

type nodeState struct {
	ID   int32  `json:"id"`
	PID  int    `json:"pid"`
	Addr string `json:"addr"`
	Dir  string `json:"dir"`
}

const stateFile = "cluster.json"

func (c *Cluster) writeState() error {
	s := state{Version: c.cfg.Version, ID: c.id}
	for _, n := range c.nodes {
		s.Nodes = append(s.Nodes, nodeState{ID: n.ID, PID: n.PID(), Addr: n.Addr, Dir: n.dir})
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(filepath.Join(c.cfg.Dir, stateFile), b, 0o644); err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	return nil
}

// ErrNotRunning is returned by Status and StopDir when dir holds no
// cluster started with Detach.
var ErrNotRunning = errors.New("kafkacluster: no cluster")

// NodeStatus is one node of a detached cluster as Status sees it.
type NodeStatus struct {
	ID      int32
	PID     int
	Addr    string
	Running bool
	Log     string
}

// Status reports on the detached cluster in dir.
func Status(dir string) (version string, nodes []NodeStatus, err error) {
	s, err := loadState(dir)
	if err != nil {
		return "", nil, err
	}
	for _, n := range s.Nodes {
		nodes = append(nodes, NodeStatus{ID: n.ID, PID: n.PID, Addr: n.Addr, Running: !processGone(n.PID), Log: filepath.Join(n.Dir, "server.log")})
	}
	return s.Version, nodes, nil
}

// StopDir stops the detached cluster in dir by PID (SIGTERM, SIGKILL after
// grace) and removes its state file; the data stays for inspection.
func StopDir(dir string, grace time.Duration) error {
	s, err := loadState(dir)
	if err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if !processGone(n.PID) && isJava(n.PID) {
			syscall.Kill(n.PID, syscall.SIGCONT)
			syscall.Kill(n.PID, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(grace)
	for _, n := range s.Nodes {
		for !processGone(n.PID) && isJava(n.PID) {
			if time.Now().After(deadline) {
				syscall.Kill(n.PID, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return os.Remove(filepath.Join(dir, stateFile))
}

func loadState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("%w is running from %s (no %s there)", ErrNotRunning, dir, stateFile)
	}
	if err != nil {
		return s, fmt.Errorf("kafkacluster: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("kafkacluster: %s is damaged: %w", filepath.Join(dir, stateFile), err)
	}
	return s, nil
}

// isJava guards StopDir against a recycled PID: it signals only a java
// process.
func isJava(pid int) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && filepath.Base(exe) == "java"
}
