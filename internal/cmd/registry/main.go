// Command registry starts, stops and reports on a real Schema Registry on
// loopback (Apicurio Registry, Confluent-compatible API) for trying eosctl's
// Avro topologies. scripts/registry runs it; the tests use package
// schemaregistry directly.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/internal/schemaregistry"
)

const usage = `Usage: scripts/registry start|stop|status|env [flags]

Runs a real Schema Registry on loopback: Apicurio Registry ` + schemaregistry.Version + ` from
Maven Central, on Java 17 with in-memory storage, serving the Confluent-
compatible API at URL` + schemaregistry.APIPath + `. Nothing to install but Java 17+ and
Maven; the first start fetches it into ~/.cache/eos (or $EOS_KAFKA_CACHE).

  start    start it, wait until the API answers, print the URL eosctl takes
           (exit 0), and leave it running
  stop     stop it by PID (SIGTERM, then SIGKILL after 30s)
  status   its URL and PID; exit 1 if it is not running
  env      print export EOSCTL_SCHEMA_REGISTRY=URL for the running one:
           eval "$(scripts/registry env)"

The storage is in memory: a stopped registry forgets its schemas.

Examples:
  scripts/registry start               # on 127.0.0.1:8081
  eval "$(scripts/registry env)"
  scripts/registry stop

Exit codes: 0 ok, 1 failure (see the message and the log), 2 bad input or
a missing tool (java, mvn), 3 the port is taken.

Flags:
`

// state is what a detached registry leaves in its directory.
type state struct {
	PID int    `json:"pid"`
	URL string `json:"url"`
	Log string `json:"log"`
}

const stateFile = "registry.json"

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		out, code := os.Stderr, 2
		if len(os.Args) == 2 {
			out, code = os.Stdout, 0
		}
		fs, _, _ := flags()
		fs.SetOutput(out)
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
		os.Exit(code)
	}
	fs, port, dir := flags()
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = start(*dir, *port)
	case "stop":
		err = stop(*dir)
	case "status", "env":
		var s state
		if s, err = load(*dir); err == nil {
			if kafkacluster.ProcessGone(s.PID) {
				err = fmt.Errorf("the registry started from %s (pid %d) is not running; its log: %s", *dir, s.PID, s.Log)
			} else if os.Args[1] == "env" {
				fmt.Printf("export EOSCTL_SCHEMA_REGISTRY=%s\n", s.URL)
			} else {
				fmt.Printf("Apicurio Registry %s  running  pid %d  %s  %s\n", schemaregistry.Version, s.PID, s.URL, s.Log)
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "registry: unknown command %q (want start, stop, status or env)\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		switch {
		case errors.Is(err, kafkacluster.ErrMissingTool):
			os.Exit(2)
		case errors.Is(err, schemaregistry.ErrPortTaken):
			os.Exit(3)
		}
		os.Exit(1)
	}
}

func flags() (*flag.FlagSet, *int, *string) {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	port := fs.Int("port", 8081, "HTTP port on 127.0.0.1 (0 for a free one, printed at the end)")
	dir := fs.String("dir", filepath.Join(os.TempDir(), "eos-registry"), "directory for the log and the PID file")
	return fs, port, dir
}

func start(dir string, port int) error {
	if s, err := load(dir); err == nil && !kafkacluster.ProcessGone(s.PID) {
		return fmt.Errorf("a registry is already running from %s (pid %d, %s): scripts/registry stop first, or pass another --dir", dir, s.PID, s.URL)
	}
	if port < 0 || port > 65535 {
		fmt.Fprintf(os.Stderr, "registry: --port %d is not a port\n", port)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	r, err := schemaregistry.Start(ctx, schemaregistry.Config{Port: port, Dir: dir, Detach: true,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "registry: "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(state{PID: r.PID(), URL: r.URL(), Log: r.LogPath()}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, stateFile), b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "registry: Apicurio Registry %s is up (pid %d, log %s); stop with scripts/registry stop\n", schemaregistry.Version, r.PID(), r.LogPath())
	fmt.Println(r.URL())
	return nil
}

func stop(dir string) error {
	s, err := load(dir)
	if err != nil {
		return err
	}
	if !kafkacluster.ProcessGone(s.PID) && kafkacluster.IsJava(s.PID) {
		syscall.Kill(s.PID, syscall.SIGTERM)
		deadline := time.Now().Add(30 * time.Second)
		for !kafkacluster.ProcessGone(s.PID) {
			if time.Now().After(deadline) {
				syscall.Kill(s.PID, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	fmt.Printf("stopped the registry in %s\n", dir)
	return os.Remove(filepath.Join(dir, stateFile))
}

func load(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return s, fmt.Errorf("no registry is running from %s (no %s there); start one with scripts/registry start", dir, stateFile)
	}
	return s, json.Unmarshal(b, &s)
}
