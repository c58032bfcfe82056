package datagen

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"
)

// NumUsers is the number of distinct user names [User] returns:
// "user-00" through "user-15".
const NumUsers = 16

// padField is the fixed overhead of the pad field: `,"pad":""`.
const padField = len(`,"pad":""`)

// User returns the user name for record i, one of [NumUsers] names of the
// form "user-07". The mapping is deterministic but deliberately not i%16:
// the index is scrambled with a multiplicative hash so that a window of
// consecutive records touches users in an irregular pattern, as real traffic
// would, while reference computations can still derive it from i alone.
func User(i int64) string {
	u := userIndex(i)
	return "user-" + string(rune('0'+u/10)) + string(rune('0'+u%10))
}

func userIndex(i int64) uint64 {
	// Fibonacci hashing: the top 4 bits of i*2^64/phi.
	return (uint64(i) * 0x9E3779B97F4A7C15) >> 60
}

// Amount returns the deterministic amount of record i, in [0, 99.9] with
// one decimal: ((i*7919) mod 1000) / 10. It is exact when summed in tenths,
// so aggregation references should sum int64(Amount*10) or compare with a
// tolerance rather than expect float addition to be associative.
//
// Amount is defined for i >= 0, which is all [Produce] generates.
func Amount(i int64) float64 {
	return float64(i%1000*7919%1000) / 10
}

// Value returns the JSON value of record i with event time ts:
//
//	{"seq":i,"ts":<unix ms>,"user":"user-07","amount":12.3,"pad":"xxxx"}
//
// Fields always appear in this order. If size is larger than the unpadded
// encoding, the value is padded to exactly size bytes: with a "pad" field of
// 'x' when there is room for one, otherwise (1 to 8 bytes short) with
// insignificant spaces before the closing brace, which every JSON parser
// accepts. If size is not larger, the value is the unpadded encoding and is
// longer than size; that is not an error, so size 0 means "minimal".
func Value(i int64, ts time.Time, size int) []byte {
	b := make([]byte, 0, max(size, 96))
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, i, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ts.UnixMilli(), 10)
	b = append(b, `,"user":"`...)
	b = append(b, User(i)...)
	b = append(b, `","amount":`...)
	b = strconv.AppendFloat(b, Amount(i), 'f', 1, 64)

	switch room := size - len(b) - 1; { // -1 for the closing brace
	case room >= padField:
		b = append(b, `,"pad":"`...)
		for range room - padField {
			b = append(b, 'x')
		}
		b = append(b, '"')
	case room > 0:
		for range room {
			b = append(b, ' ')
		}
	}
	return append(b, '}')
}

// MinSize returns the length of the unpadded encoding of record i at ts,
// that is, the smallest size for which Value(i, ts, size) is exactly size
// bytes. It grows with the number of digits in i.
func MinSize(i int64, ts time.Time) int {
	return len(Value(i, ts, 0))
}

// Lines reads r to its end and returns its lines, without their line
// endings ("\n" or "\r\n"), as record values for Config.Values: every line
// is one record, empty lines too, so that nothing of the text is dropped.
// A last line without a line ending counts; an empty r has no lines.
func Lines(r io.Reader) ([][]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("datagen: reading lines: %w", err)
	}
	if len(data) == 0 {
		return nil, nil
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte("\r"))
	}
	return lines, nil
}
