package reconcile

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// text is a value's comparable text: numbers in their shortest exact form,
// bytes as strings, NULL as NULL.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// same compares a topic value with a table value: as text, or as numbers
// when both read as numbers (MySQL returns numbers as text).
func same(topic, table any) bool {
	a, b := text(topic), text(table)
	if a == b {
		return true
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa == fb || (fb != 0 && abs((fa-fb)/fb) < 1e-12)
	}
	if (a == "true" || a == "false") && (b == "1" || b == "0") {
		return (a == "true") == (b == "1")
	}
	return false
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
