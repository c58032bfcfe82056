// Package schemaregistry starts a real Schema Registry on loopback, from the
// jars Maven Central serves, with no Docker and nothing installed by hand:
// Apicurio Registry 2.6.13.Final (Confluent's own registry is not on Maven
// Central), which serves the Confluent-compatible API at /apis/ccompat/v7.
// The tests use it to run the Avro topologies against a registry users run,
// and scripts/registry wraps it for people who want one to point eosctl at.
//
// What it does: fetch the Quarkus fast-jar tarball once with Maven into the
// cache (~/.cache/eos/apicurio-<version>, or $EOS_KAFKA_CACHE), unpack it,
// start `java -jar` on the chosen port and wait until the API answers.
//
// What can go wrong: no java or mvn on PATH (kafkacluster.ErrMissingTool);
// Maven Central unreachable (the Maven output is in the error); the port
// taken (ErrPortTaken); the storage is in memory, so a restarted registry
// has forgotten every schema: a test that restarts it registers its schemas
// again, in the same order, to get the same ids back.
package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/eosctl/eos/internal/kafkacluster"
)

// Version is the Apicurio Registry release the launcher runs; 3.x needs
// Java 21.
const Version = "2.6.13.Final"

// APIPath is where Apicurio serves the Confluent-compatible API: the URL
// eosctl's --schema-registry takes is the base URL followed by it.
const APIPath = "/apis/ccompat/v7"

// ErrPortTaken is returned when the registry's port is in use.
var ErrPortTaken = errors.New("schemaregistry: port taken")

// Config says how to run the registry.
type Config struct {
	Port int    // HTTP port on 127.0.0.1; 0 picks a free one
	Dir  string // where the log (and, detached, the PID file) go; a temp dir if empty
	Heap string // JVM heap, default 512m
	// Detach leaves the registry running after this process exits (the
	// script); otherwise it dies with the process that started it.
	Detach bool
	// StartTimeout bounds the wait for the API to answer (default 90s).
	StartTimeout time.Duration
	Logf         func(string, ...any)
}

// Registry is a running registry.
type Registry struct {
	cfg    Config
	jar    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Resolve makes sure the registry's runner jar is unpacked in the cache,
// running Maven once, and returns its path.
func Resolve(ctx context.Context, logf func(string, ...any)) (string, error) {
	if err := kafkacluster.LookTools("Apicurio Registry "+Version+" needs Java 17+ and Maven to fetch it", "java", "mvn"); err != nil {
		return "", err
	}
	root, err := kafkacluster.CacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "apicurio-"+Version)
	jar := filepath.Join(dir, "apicurio-registry-app-"+Version+"-runner.jar")
	err = kafkacluster.Once(dir, "resolved", func() error {
		if logf != nil {
			logf("fetching Apicurio Registry %s with Maven into %s (once; later starts reuse it)", Version, dir)
		}
		dl := filepath.Join(dir, "download")
		if err := kafkacluster.Maven(ctx, "dependency:copy", "-Dartifact=io.apicurio:apicurio-registry-app:"+Version+":tar.gz:all",
			"-DoutputDirectory="+dl); err != nil {
			return fmt.Errorf("mvn could not fetch Apicurio Registry %s: %w", Version, err)
		}
		tgz := filepath.Join(dl, "apicurio-registry-app-"+Version+"-all.tar.gz")
		if out, err := exec.CommandContext(ctx, "tar", "xzf", tgz, "-C", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("unpacking %s: %w: %s", tgz, err, out)
		}
		os.RemoveAll(dl)
		if _, err := os.Stat(jar); err != nil {
			return fmt.Errorf("the tarball unpacked without %s", jar)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("schemaregistry: %w", err)
	}
	return jar, nil
}

// Start fetches (once) and starts a registry, and returns once its API
// answers.
func Start(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Heap == "" {
		cfg.Heap = "512m"
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	jar, err := Resolve(ctx, cfg.Logf)
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "eos-registry-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("schemaregistry: finding a free port: %w", err)
		}
		cfg.Port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	r := &Registry{cfg: cfg, jar: jar}
	if err := r.launch(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// URL is the base URL of the Confluent-compatible API, what eosctl's
// --schema-registry takes.
func (r *Registry) URL() string { return "http://" + r.Addr() + APIPath }

// Addr is host:port.
func (r *Registry) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.cfg.Port)) }

// PID of the running JVM.
func (r *Registry) PID() int { return r.cmd.Process.Pid }

// Dir holds the log.
func (r *Registry) Dir() string { return r.cfg.Dir }

// LogPath is the JVM's output.
func (r *Registry) LogPath() string { return filepath.Join(r.cfg.Dir, "registry.log") }

func (r *Registry) launch(ctx context.Context) error {
	if c, err := net.DialTimeout("tcp", r.Addr(), time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%w: something already answers on %s", ErrPortTaken, r.Addr())
	}
	out, err := os.OpenFile(r.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("java", "-Xmx"+r.cfg.Heap, "-XX:+UseSerialGC",
		"-Dquarkus.http.host=127.0.0.1", "-Dquarkus.http.port="+strconv.Itoa(r.cfg.Port),
		"-Dquarkus.management.enabled=false",
		// BACKWARD, as Confluent's registry defaults to: a new version must
		// read what the previous one wrote.
		"-Dregistry.rules.global.compatibility=BACKWARD", "-jar", r.jar)
	cmd.Dir = r.cfg.Dir
	cmd.Stdout, cmd.Stderr = out, out
	if r.cfg.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("schemaregistry: starting java: %w", err)
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	exited := r.exited
	go func() { cmd.Wait(); close(exited) }()
	r.cfg.Logf("waiting for Apicurio Registry on %s (log %s)", r.Addr(), r.LogPath())
	deadline := time.Now().Add(r.cfg.StartTimeout)
	for {
		if Ready(ctx, r.URL()) {
			return nil
		}
		select {
		case <-exited:
			tail := logTail(r.LogPath())
			if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "Port already bound") {
				return fmt.Errorf("%w: port %d (%s)", ErrPortTaken, r.cfg.Port, r.LogPath())
			}
			return fmt.Errorf("schemaregistry: the JVM exited before serving; its log ends:\n%s", tail)
		case <-ctx.Done():
			r.Kill()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Kill()
			return fmt.Errorf("schemaregistry: not serving on %s within %s; its log ends:\n%s", r.Addr(), r.cfg.StartTimeout, logTail(r.LogPath()))
		}
	}
}

// Ready reports whether the Confluent-compatible API at url answers.
func Ready(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/subjects", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill stops the JVM with SIGKILL and waits for it: an outage, or the end
// of a test.
func (r *Registry) Kill() {
	if r.cmd == nil {
		return
	}
	select {
	case <-r.exited:
		return
	default:
	}
	syscall.Kill(r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.exited
}

// Restart starts the registry again on the same port after Kill; it has
// forgotten its schemas (in-memory storage).
func (r *Registry) Restart(ctx context.Context) error {
	r.Kill()
	return r.launch(ctx)
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
