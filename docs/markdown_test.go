package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// block is one fenced code block of a Markdown file.
type block struct {
	file    string   // path relative to the repository root
	line    int      // 1-based line of the opening fence
	lang    string   // first word of the info string
	heading string   // the nearest heading above it, "## ..." included
	body    []string // its lines, without the fences
	noTest  string   // the reason given by a <!-- no-test: REASON --> comment right above it
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// shell says whether the block holds commands: ```sh, ```bash and ```shell
// blocks are scripts, ```console blocks are transcripts ("$ " lines are
// commands, the other lines their output).
func (b block) shell() bool {
	switch b.lang {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

var noTestComment = regexp.MustCompile(`^<!--\s*no-test:\s*(.*?)\s*-->$`)

// parseBlocks returns the fenced code blocks of a Markdown file.
func parseBlocks(file string, text string) ([]block, error) {
	var (
		blocks  []block
		cur     *block
		fence   string
		heading string
		prev    string // the last non-blank line outside a block
	)
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				blocks = append(blocks, *cur)
				cur, prev = nil, ""
				continue
			}
			cur.body = append(cur.body, line)
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			b := block{file: file, line: i + 1, heading: heading}
			if fields := strings.Fields(strings.TrimPrefix(trimmed, f)); len(fields) > 0 {
				b.lang = fields[0]
			}
			if m := noTestComment.FindStringSubmatch(prev); m != nil {
				if b.noTest = m[1]; b.noTest == "" {
					return nil, fmt.Errorf("%s:%d: a no-test comment must give its reason: <!-- no-test: REASON -->", file, i)
				}
			}
			cur, fence = &b, f
			continue
		}
		if strings.HasPrefix(trimmed, "#") && strings.HasPrefix(strings.TrimLeft(trimmed, "#"), " ") {
			heading = trimmed
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: a block is never closed", cur)
	}
	return blocks, nil
}

// fenceOf returns the fence (``` or ~~~, three or more) a line opens with,
// or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// docFiles returns README.md and docs/*.md, relative to root.
func docFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, fmt.Errorf("listing docs: %w", err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, fmt.Errorf("docs path %s: %w", f, err)
		}
		out = append(out, rel)
	}
	sort.Strings(out[1:])
	return out, nil
}

// allBlocks parses the blocks of every file docFiles lists.
func allBlocks(root string) ([]block, error) {
	files, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	var all []block
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		bs, err := parseBlocks(f, string(text))
		if err != nil {
			return nil, err
		}
		all = append(all, bs...)
	}
	return all, nil
}

// command is one command of a block, with what its transcript shows it
// printing.
type command struct {
	text       string   // the command, continuation lines joined by newlines
	background bool     // ends with &
	errors     []string // "eosctl: " lines the transcript shows: the command must fail with them
	output     bool     // the transcript shows it printing something else
}

// script turns a block into a bash script. A ```sh block runs as written.
// In a ```console transcript, a command shown printing an "eosctl: " error
// must fail, and a command shown printing output must print something.
func (b block) script() (string, []string) {
	if b.lang != "console" {
		return strings.Join(b.body, "\n") + "\n", nil
	}
	var (
		cmds     []*command
		expected []string
	)
	for i := 0; i < len(b.body); i++ {
		line := b.body[i]
		if !strings.HasPrefix(line, "$ ") {
			if len(cmds) == 0 || strings.TrimSpace(line) == "" {
				continue
			}
			c := cmds[len(cmds)-1]
			if strings.HasPrefix(line, "eosctl: ") {
				c.errors = append(c.errors, line)
				expected = append(expected, line)
			} else {
				c.output = true
			}
			continue
		}
		text := strings.TrimPrefix(line, "$ ")
		for strings.HasSuffix(text, "\\") && i+1 < len(b.body) {
			i++
			text += "\n" + b.body[i]
		}
		bare, _, _ := strings.Cut(text, " #")
		cmds = append(cmds, &command{text: text, background: strings.HasSuffix(strings.TrimSpace(bare), "&")})
	}
	var sb strings.Builder
	for _, c := range cmds {
		quoted := shellQuote(c.text)
		switch {
		case c.background:
			sb.WriteString(c.text + "\n")
		case len(c.errors) > 0:
			fmt.Fprintf(&sb, "if %s\nthen echo \"docs: this command should have failed: \"%s >&2; exit 1; fi\n", c.text, quoted)
		case c.output:
			fmt.Fprintf(&sb, "out=$(%s\n)\nprintf '%%s\\n' \"$out\"\n[ -n \"$out\" ] || { echo \"docs: this command printed nothing: \"%s >&2; exit 1; }\n", c.text, quoted)
		default:
			sb.WriteString(c.text + "\n")
		}
	}
	return sb.String(), expected
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
