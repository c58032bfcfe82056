package kafkacluster

import (
	"context"
	"os/exec"
)

// Tool returns a command that runs one of Apache Kafka's own tools from
// the cached jars, for example org.apache.kafka.tools.TransactionsCommand
// (kafka-transactions.sh) with its arguments. Tests use it to check eosctl
// against Kafka's answer on the same cluster.
func Tool(ctx context.Context, version, class string, args ...string) (*exec.Cmd, error) {
	if version == "" {
		version = DefaultVersion
	}
	cache, err := CacheDir(version)
	if err != nil {
		return nil, err
	}
	cp, err := Resolve(ctx, version, cache, nil)
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, "java", append([]string{"-Xmx256m", "-Dlog4j2.level=WARN", "-cp", cp, class}, args...)...), nil
}

// ProcessGone reports whether pid no longer names a live process (a zombie
// counts as gone), for other launchers that stop processes by PID.
func ProcessGone(pid int) bool { return processGone(pid) }

// IsJava reports whether pid is a java process, so that a launcher stopping
// a JVM by a recorded PID does not signal a recycled one.
func IsJava(pid int) bool { return isJava(pid) }
