package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrDataDirInUse is wrapped when another broker holds the data directory.
var ErrDataDirInUse = errors.New("in use by another broker")

// lockFile is the file in a data directory whose flock marks it in use.
const lockFile = "eosctl.lock"

// dirLock is an exclusive flock on a data directory's lock file: two
// brokers writing one directory would each overwrite the other's state on
// shutdown. The kernel drops the lock when its holder exits, however it
// exits (a SIGKILLed broker leaves no stale lock); the file stays, holding
// the last holder's PID.
type dirLock struct {
	f       *os.File
	created bool // the lock file did not exist before
}

// lockDataDir takes the lock of dir, creating dir if it is missing, or
// fails at once naming the holder's PID.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: data directory: %w", err)
	}
	path := filepath.Join(dir, lockFile)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: locking data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := make([]byte, 32)
		n, _ := f.ReadAt(holder, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("broker: data directory %s: %w (pid %s)", dir, ErrDataDirInUse, orUnknown(strings.TrimSpace(string(holder[:n]))))
		}
		return nil, fmt.Errorf("broker: locking data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f, created: os.IsNotExist(statErr)}, nil
}

// release drops the lock; with discard (a start that failed), it also
// removes the lock file if this lock created it, leaving the directory as
// it was found.
func (l *dirLock) release(discard bool) {
	if l == nil {
		return
	}
	if discard && l.created {
		_ = os.Remove(l.f.Name())
	}
	_ = l.f.Close()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
