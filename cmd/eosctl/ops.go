package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/admin"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminConn is an admin connection for the operations commands (txn, lag).
type adminConn struct {
	cl   *kgo.Client
	adm  *kadm.Client
	opts []kgo.Opt
}

// connectAdmin checks that the brokers answer within --timeout and returns
// an admin client. Close it with close.
func (g *globals) connectAdmin(ctx context.Context) (*adminConn, error) {
	opts, err := g.clientOpts()
	if err != nil {
		return nil, err
	}
	cl, err := admin.Connect(ctx, g.timeout, opts...)
	if err != nil {
		return nil, err
	}
	return &adminConn{cl: cl, adm: kadm.NewClient(cl), opts: opts}, nil
}

func (c *adminConn) close() { c.cl.Close() }

// notFound turns the inspect package's "does not exist" errors into usage
// errors (exit code 2): the command line named something that is not there.
func notFound(err error) error {
	if errors.Is(err, inspect.ErrNotFound) || errors.Is(err, inspect.ErrNoCommits) {
		return usage(err)
	}
	return err
}

// table writes aligned columns, as rpk and kubectl do.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(toAny(header)...)
	return t
}

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() { t.tw.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// stamp renders a broker timestamp, "-" if unknown.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// age renders a duration for humans: seconds for long ones, milliseconds
// for short ones.
func age(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// orDash renders an empty string as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// confirm asks question on stderr and reads the answer from in; only "y"
// or "yes" proceeds. A closed input (no terminal, no --yes) declines.
func confirm(in io.Reader, question string) error {
	fmt.Fprintf(os.Stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	if line == "" {
		fmt.Fprintln(os.Stderr)
	}
	return errors.New("not confirmed, nothing written (pass --yes to skip the question)")
}
