package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// commands returns the command lines of a shell block, without comments
// and indentation.
func commands(lines []string) []string {
	var out []string
	for _, line := range lines {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// The example in `eosctl --help` ("or step by step") is the README's
// walk-through, command for command, so that what TestEveryCommandBlockInTheDocsRuns
// runs is what the binary shows too.
func TestRootHelpShowsTheReadmeWalkThrough(t *testing.T) {
	root := repoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseBlocks("README.md", string(text))
	if err != nil {
		t.Fatal(err)
	}
	var walk *block
	for i, b := range blocks {
		if b.heading == walkThroughHeading && b.shell() {
			walk = &blocks[i]
			break
		}
	}
	if walk == nil {
		t.Fatalf("README.md has no shell block under %q", walkThroughHeading)
	}
	out, err := exec.Command(eosctl, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(out), "# or step by step")
	example, _, _ = strings.Cut(example, "\n\n")
	_, example, _ = strings.Cut(example, "\n")
	if got, want := strings.Join(commands(strings.Split(example, "\n")), "\n"), strings.Join(commands(walk.body), "\n"); got != want {
		t.Errorf("eosctl --help's step by step:\n%s\nREADME.md:%d's walk-through:\n%s", got, walk.line, want)
	}
}
