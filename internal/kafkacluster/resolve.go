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

// CacheDir returns where the jars of version are kept: $EOS_KAFKA_CACHE if
// set, else the user's cache directory (~/.cache/eos/kafka-<version>).
func CacheDir(version string) (string, error) {
	if d := os.Getenv("EOS_KAFKA_CACHE"); d != "" {
		return filepath.Join(d, "kafka-"+version), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkacluster: no cache directory (set EOS_KAFKA_CACHE): %w", err)
	}
	return filepath.Join(base, "eos", "kafka-"+version), nil
}

// lookTools checks that java and mvn are on PATH, naming the first missing.
func lookTools(names ...string) error {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return fmt.Errorf("%w: %s is not on PATH (Apache Kafka %s needs Java 17+ and Maven to fetch its jars)", ErrMissingTool, n, DefaultVersion)
		}
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
	done := filepath.Join(dir, "resolved")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kafkacluster: creating the cache %s: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("kafkacluster: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("kafkacluster: locking the cache %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(done); err == nil {
		return filepath.Join(libs, "*"), nil
	}
	if progress != nil {
		progress(fmt.Sprintf("resolving Apache Kafka %s with Maven into %s (once; later starts reuse it)", version, dir))
	}
	if err := os.WriteFile(filepath.Join(dir, "pom.xml"), []byte(pom(version)), 0o644); err != nil {
		return "", fmt.Errorf("kafkacluster: %w", err)
	}
	os.RemoveAll(libs)
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", filepath.Join(dir, "pom.xml"),
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+libs)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkacluster: mvn could not resolve Apache Kafka %s: %w\n%s", version, err, lastLines(out.String(), 20))
	}
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+version+".jar")); err != nil {
		return "", fmt.Errorf("kafkacluster: mvn finished but %s has no kafka_2.13-%s.jar", libs, version)
	}
	if err := os.WriteFile(done, []byte(version+"\n"), 0o644); err != nil {
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
