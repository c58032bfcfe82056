package testenv

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Eventually retries cond every 50ms for up to within and fails t, naming
// what and cond's last word, if it never holds.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, within, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Get fetches url and returns its status code and trimmed body; a request
// that fails fails t.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
