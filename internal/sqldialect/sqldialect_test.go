package sqldialect

import "testing"

// An identifier with the dialect's quote character in it stays one
// identifier: the character is doubled, so a name cannot end the quoting
// early (idempotency's own quote() once left it as it was).
func TestQuoteDoublesTheQuoteCharacter(t *testing.T) {
	for _, tc := range []struct {
		d        *Dialect
		id, want string
	}{
		{Postgres, `a"b`, `"a""b"`},
		{SQLite, `a"b`, `"a""b"`},
		{MySQL, "a`b", "`a``b`"},
		{Postgres, "plain", `"plain"`},
	} {
		if got := tc.d.Quote(tc.id); got != tc.want {
			t.Errorf("%s.Quote(%q) = %s, want %s", tc.d.Name, tc.id, got, tc.want)
		}
	}
	if Postgres.Ph(3) != "$3" || MySQL.Ph(3) != "?" || SQLite.Ph(1) != "?" {
		t.Error("placeholders: want $N for PostgreSQL, ? otherwise")
	}
}
