package main

import (
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"
)

// countProgress is a progress bar for a command that works through a known
// number of records, such as produce: a bar, the count, the rate over the
// last updates and the time left, redrawn in place on a terminal. It comes
// from github.com/schollz/progressbar rather than hand-written escape codes
// so that the bar fits the terminal's width and the rate and the estimate
// are smoothed the way users know from other tools.
//
// Callers create one only when the writer is a terminal: redraws in a CI log
// or in a test's captured output are noise, and the command's summary line
// says the same once at the end.
type countProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

// newCountProgress draws an empty bar for total records on w at once, so
// that a slow first batch (connecting, creating the topic) shows as 0%.
func newCountProgress(w io.Writer, what string, total int64) *countProgress {
	return &countProgress{w: w, bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("records"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionUseANSICodes(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)}
}

// set is the callback for datagen.Config.Progress: done of total records.
func (p *countProgress) set(done, _ int64) { _ = p.bar.Set64(done) }

// finish ends the bar. A finished run's bar is cleared, because the
// command's summary line follows; a bar that stopped short (an error, an
// interrupt) is left where it stopped, above the error that says why.
func (p *countProgress) finish() {
	if p.bar.IsFinished() {
		_ = p.bar.Clear()
		return
	}
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}
