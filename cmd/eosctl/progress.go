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

// finish ends the bar once the command is done, err saying how. A run
// that succeeded has its bar cleared, because the command's summary (or
// table) follows; a bar that stopped short (an error, an interrupt) is
// left where it stopped, above the error that says why.
func (p *countProgress) finish(err error) {
	if err == nil {
		_ = p.bar.Exit()
		_ = p.bar.Clear()
		return
	}
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}

// stretchProgress is countProgress for a command that works through one
// stretch after another, such as bench (each size's backlog, then every
// run's drain and latency phases): each stretch gets a bar of its own, on
// the same line, so that its count, rate and time left are its own rather
// than an average over unlike work.
type stretchProgress struct {
	w    io.Writer
	what string
	bar  *countProgress
}

// set reports done of total records of the stretch described by what; a
// new what ends the previous stretch's bar and starts the next.
func (p *stretchProgress) set(what string, done, total int64) {
	if p.bar == nil || what != p.what {
		if p.bar != nil {
			p.bar.finish(nil)
		}
		p.what, p.bar = what, newCountProgress(p.w, what, total)
	}
	p.bar.set(done, total)
}

// finish ends the last stretch's bar as countProgress.finish does.
func (p *stretchProgress) finish(err error) {
	if p.bar != nil {
		p.bar.finish(err)
	}
}
