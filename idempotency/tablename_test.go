package idempotency

import (
	"strings"
	"testing"
)

// TestATableNameWithAQuoteIsRefused: Config.Table must be a plain
// identifier; anything else is refused in one line before any SQL.
func TestATableNameWithAQuoteIsRefused(t *testing.T) {
	for _, name := range []string{`eos"idem`, "eos`idem", "eos idem; DROP TABLE x"} {
		c := Config{Table: name}
		if err := c.defaults(); err == nil || !strings.Contains(err.Error(), "not a plain SQL identifier") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Table %q: %v; want refused as not a plain SQL identifier, in one line", name, err)
		}
	}
}
