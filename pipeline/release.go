package pipeline

// Releaser is implemented by a Transform that writes its outputs' bytes
// into buffers of its own and would write later outputs over them rather
// than allocate new ones. The worker calls Released once the client has
// given back every record emitted before: when a transaction has ended,
// committed or aborted, and when a session's client has been closed. From
// then on the Transform may reuse those bytes. A Forker's forks are told
// too. Released runs on the worker's goroutine, between polls, never while
// the Transform or a fork processes.
//
// What can go wrong: bytes reused before Released may still be on their
// way to the broker, and a record is then written with another's value.
// Buffers kept for reuse are live memory: keep no more than a
// transaction's worth.
type Releaser interface {
	Released()
}

// released tells the Transform and its forks that the client holds none
// of their outputs (see Releaser).
func (w *Worker) released() {
	if r, ok := w.t.(Releaser); ok {
		r.Released()
	}
	for _, l := range w.laneSet[min(1, len(w.laneSet)):] {
		if r, ok := l.t.(Releaser); ok {
			r.Released()
		}
	}
}
