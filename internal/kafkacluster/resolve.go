package kafkacluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultVersion is the Apache Kafka release the launcher runs by default.
const DefaultVersion = "4.4.0"

// log4jVersion and slf4jVersion bind Kafka's logging to log4j2. slf4j-api
// is pinned because Maven's nearest-wins rule otherwise picks the 1.7 API
// that kafka-tools' dependencies carry, which the log4j2 binding ignores.
const (
	log4jVersion = "2.26.1"
	slf4jVersion = "2.0.17"
)

// ErrMissingTool is returned when java or mvn is not on PATH.
var ErrMissingTool = errors.New("kafkacluster: missing tool")

// CacheDir returns where the jars of version are kept: CacheRoot's
// kafka-<version> (~/.cache/eos/kafka-<version> by default).
func CacheDir(version string) (string, error) {
	root, err := CacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "kafka-"+version), nil
}

// CacheRoot returns the directory under which eos keeps what it fetches or
// builds with Maven (Apache Kafka's jars, the bench's Kafka Streams peer):
// $EOS_KAFKA_CACHE if set, else the user's cache directory's eos
// (~/.cache/eos).
func CacheRoot() (string, error) {
	if d := os.Getenv("EOS_KAFKA_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkacluster: no cache directory (set EOS_KAFKA_CACHE): %w", err)
	}
	return filepath.Join(base, "eos"), nil
}

// lookTools checks that java and mvn are on PATH, naming the first missing.
func lookTools(names ...string) error {
	return LookTools(fmt.Sprintf("Apache Kafka %s needs Java 17+ and Maven to fetch its jars", DefaultVersion), names...)
}

// LookTools checks that every named program is on PATH; the error names
// the first one missing and why it is needed, and wraps ErrMissingTool.
func LookTools(why string, names ...string) error {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return fmt.Errorf("%w: %s is not on PATH (%s)", ErrMissingTool, n, why)
		}
	}
	return nil
}

// Once runs build in dir unless an earlier call finished it there (the file
// dir/done exists), creating dir first and holding an exclusive lock on
// dir/lock meanwhile, so that several processes starting at once build it
// once: the first builds, the others wait and reuse. done is written only
// once build succeeded.
func Once(dir, done string, build func() error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the cache %s: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking the cache %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	marker := filepath.Join(dir, done)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	if err := build(); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte("ok\n"), 0o644)
}

// Maven runs mvn -q -B with args; a failure carries the last lines of its
// output.
func Maven(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "mvn", append([]string{"-q", "-B"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w\n%s", err, lastLines(out.String(), 20))
	}
	return nil
}

// Resolve makes sure the jars of Apache Kafka version (broker, tools and a
// log4j2 binding) are in dir/libs, running Maven once, and returns the
// classpath glob for java -cp. It is safe to call from several processes
// at once: the first resolves under a lock, the others wait and reuse.
func Resolve(ctx context.Context, version, dir string, progress func(string)) (string, error) {
	if err := lookTools("java", "mvn"); err != nil {
		return "", err
	}
	libs := filepath.Join(dir, "libs")
	err := Once(dir, "resolved", func() error {
		if progress != nil {
			progress(fmt.Sprintf("resolving Apache Kafka %s with Maven into %s (once; later starts reuse it)", version, dir))
		}
		if err := os.WriteFile(filepath.Join(dir, "pom.xml"), []byte(pom(version)), 0o644); err != nil {
			return err
		}
		os.RemoveAll(libs)
		if err := Maven(ctx, "-f", filepath.Join(dir, "pom.xml"),
			"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+libs); err != nil {
			return fmt.Errorf("mvn could not resolve Apache Kafka %s: %w", version, err)
		}
		if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+version+".jar")); err != nil {
			return fmt.Errorf("mvn finished but %s has no kafka_2.13-%s.jar", libs, version)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("kafkacluster: %w", err)
	}
	return filepath.Join(libs, "*"), nil
}

func pom(version string) string {
	dep := func(g, a, v string) string {
		return fmt.Sprintf("    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>\n", g, a, v)
	}
	return `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <!-- written by eos's kafkacluster launcher: the runtime classpath of an Apache Kafka broker and its tools -->
  <groupId>eos.local</groupId><artifactId>kafka-runtime</artifactId><version>` + version + `</version>
  <packaging>pom</packaging>
  <dependencies>
` + dep("org.apache.kafka", "kafka_2.13", version) +
		dep("org.apache.kafka", "kafka-tools", version) +
		dep("org.apache.logging.log4j", "log4j-core", log4jVersion) +
		dep("org.apache.logging.log4j", "log4j-slf4j2-impl", log4jVersion) +
		dep("org.slf4j", "slf4j-api", slf4jVersion) + `  </dependencies>
</project>
`
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
