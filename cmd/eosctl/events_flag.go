package main

import (
	"fmt"
	"os"

	"github.com/eosctl/eos/pipeline"
)

// eventsFlag opens the --events destination: "" for none, "-" for stdout,
// or a file appended to. close closes the file.
func eventsFlag(events string) (fn func(pipeline.Event), close func(), err error) {
	if events == "" {
		return nil, func() {}, nil
	}
	if events == "-" {
		return pipeline.JSONEvents(os.Stdout), func() {}, nil
	}
	f, err := os.OpenFile(events, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, usage(fmt.Errorf("--events: %w", err))
	}
	return pipeline.JSONEvents(f), func() { f.Close() }, nil
}
