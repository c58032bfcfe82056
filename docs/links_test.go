package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// TestEveryRelativeLinkResolves checks that every relative link in
// README.md, docs/*.md, RELIABILITY.md, BENCHMARKS.md and their histories
// (docs/history) names a file or
// directory of the repository, and that a #fragment names a heading of the
// Markdown file it points into (GitHub's anchors).
func TestEveryRelativeLinkResolves(t *testing.T) {
	root := repoRoot(t)
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "RELIABILITY.md", "BENCHMARKS.md", "docs/history/reliability.md", "docs/history/benchmarks.md")
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range proseLines(string(text)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if err := resolve(root, f, target); err != nil {
					t.Errorf("%s:%d: link %q: %v", f, n+1, target, err)
				}
			}
		}
	}
	t.Logf("%d relative links checked in %d files", checked, len(files))
}

// resolve checks one relative link found in file.
func resolve(root, file, target string) error {
	path, frag, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.Join(filepath.Dir(file), path)
		if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
			return fmt.Errorf("no such file: %w", err)
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	text, err := os.ReadFile(filepath.Join(root, dest))
	if err != nil {
		return fmt.Errorf("reading %s: %w", dest, err)
	}
	anchors := headingAnchors(string(text))
	if !anchors[frag] {
		return fmt.Errorf("%s has no heading with the anchor #%s", dest, frag)
	}
	return nil
}

// proseLines returns the lines of a Markdown text with the lines of fenced
// blocks blanked (line numbers stay), so code is not taken for links.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			lines[i] = ""
		case fenceOf(trimmed) != "":
			fence = fenceOf(trimmed)
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, punctuation other than - and _ dropped,
// spaces as -, and -1, -2, ... on repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(title, " ") {
			continue
		}
		var sb strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				sb.WriteRune(r)
			case r == ' ':
				sb.WriteRune('-')
			}
		}
		a := sb.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
