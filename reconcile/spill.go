package reconcile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// bucketRecords is about how many records one bucket holds: a bucket is
// judged in memory (its keys, their candidate records' column values as
// text, and with Config.Repair the records themselves), so this bounds
// the run's heap at a few tens of MiB whatever the topic's size.
const bucketRecords = 100_000

// maxBuckets bounds the open spill files (each with a 16 KiB buffer).
const maxBuckets = 1024

// spill partitions a run's records, and the table's keys, into buckets by
// a hash of the key: every record of a key, and its row's key, land in the
// same bucket, so that judging one bucket at a time is exact (the first or
// last record of a key is found among the bucket's records) while only one
// bucket is ever in memory. Buckets are temporary files, removed by close.
type spill struct {
	files []*os.File
	ws    []*bufio.Writer
	buf   []byte
}

func newSpill(dir string, records int64, per int) (*spill, error) {
	n := int(min(max(1, (records+int64(per)-1)/int64(per)), maxBuckets))
	s := &spill{}
	for range n {
		f, err := os.CreateTemp(dir, "eos-reconcile-*.spill")
		if err != nil {
			s.close()
			return nil, fmt.Errorf("reconcile: creating a spill file (Config.TempDir): %w", err)
		}
		_ = os.Remove(f.Name()) // gone when closed, even after a crash
		s.files = append(s.files, f)
		s.ws = append(s.ws, bufio.NewWriterSize(f, 16<<10))
	}
	return s, nil
}

func (s *spill) close() {
	for _, f := range s.files {
		_ = f.Close()
	}
}

func (s *spill) bucket(keyText string) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(keyText))
	return int(h.Sum64() % uint64(len(s.files)))
}

// Entry tags.
const (
	tagRecord   = 'r'
	tagTableKey = 't'
)

// spilled is one mapped record as a bucket stores it.
type spilled struct {
	keyText   string // canonical text of the key (canon)
	key       any    // the key as the mapping computed it, for the look-up
	partition int32
	offset    int64
	vals      []string    // text of each mapped column
	rec       *kgo.Record // the record itself, kept for a repair only
}

func (s *spill) addRecord(e *spilled) error {
	b := append(s.buf[:0], tagRecord)
	b = appendStr(b, e.keyText)
	b = appendKey(b, e.key)
	b = binary.AppendVarint(b, int64(e.partition))
	b = binary.AppendVarint(b, e.offset)
	b = binary.AppendUvarint(b, uint64(len(e.vals)))
	for _, v := range e.vals {
		b = appendStr(b, v)
	}
	if e.rec == nil {
		b = append(b, 0)
	} else {
		r := e.rec
		b = append(b, 1)
		b = appendStr(b, r.Topic)
		b = appendStr(b, string(r.Key))
		b = appendStr(b, string(r.Value))
		b = binary.AppendVarint(b, r.Timestamp.UnixNano())
		b = binary.AppendUvarint(b, uint64(len(r.Headers)))
		for _, h := range r.Headers {
			b = appendStr(b, h.Key)
			b = appendStr(b, string(h.Value))
		}
	}
	s.buf = b
	_, err := s.ws[s.bucket(e.keyText)].Write(b)
	return err
}

func (s *spill) addTableKey(keyText string) error {
	b := appendStr(append(s.buf[:0], tagTableKey), keyText)
	s.buf = b
	_, err := s.ws[s.bucket(keyText)].Write(b)
	return err
}

// flush writes the buffers out and rewinds every bucket for reading.
func (s *spill) flush() error {
	for i, w := range s.ws {
		if err := w.Flush(); err != nil {
			return fmt.Errorf("reconcile: writing a spill file: %w", err)
		}
		if _, err := s.files[i].Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	return nil
}

// read calls rec for each record and table for each table key of bucket
// i, in the order they were added (a partition's records in offset order).
func (s *spill) read(i int, rec func(*spilled) error, table func(string) error) error {
	r := bufio.NewReaderSize(s.files[i], 64<<10)
	for {
		tag, err := r.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch tag {
		case tagTableKey:
			k, err := readStr(r)
			if err != nil {
				return err
			}
			if err := table(k); err != nil {
				return err
			}
		case tagRecord:
			e, err := readRecord(r)
			if err != nil {
				return fmt.Errorf("reconcile: reading a spill file: %w", err)
			}
			if err := rec(e); err != nil {
				return err
			}
		default:
			return fmt.Errorf("reconcile: spill file corrupt (tag %d)", tag)
		}
	}
}

func readRecord(r *bufio.Reader) (*spilled, error) {
	var e spilled
	var err error
	if e.keyText, err = readStr(r); err != nil {
		return nil, err
	}
	if e.key, err = readKey(r); err != nil {
		return nil, err
	}
	p, err := binary.ReadVarint(r)
	if err != nil {
		return nil, err
	}
	e.partition = int32(p)
	if e.offset, err = binary.ReadVarint(r); err != nil {
		return nil, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	e.vals = make([]string, n)
	for i := range e.vals {
		if e.vals[i], err = readStr(r); err != nil {
			return nil, err
		}
	}
	has, err := r.ReadByte()
	if err != nil || has == 0 {
		return &e, err
	}
	rec := &kgo.Record{Partition: e.partition, Offset: e.offset}
	var key, val string
	if rec.Topic, err = readStr(r); err != nil {
		return nil, err
	}
	if key, err = readStr(r); err != nil {
		return nil, err
	}
	if val, err = readStr(r); err != nil {
		return nil, err
	}
	rec.Key, rec.Value = []byte(key), []byte(val)
	ts, err := binary.ReadVarint(r)
	if err != nil {
		return nil, err
	}
	rec.Timestamp = time.Unix(0, ts)
	nh, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	for range nh {
		hk, err := readStr(r)
		if err != nil {
			return nil, err
		}
		hv, err := readStr(r)
		if err != nil {
			return nil, err
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: hk, Value: []byte(hv)})
	}
	e.rec = rec
	return &e, nil
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func readStr(r *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// appendKey encodes a key in its Go type (what the mapping computed), so
// that the look-up passes the database the same value the sink did.
func appendKey(b []byte, k any) []byte {
	switch x := k.(type) {
	case int:
		return binary.AppendVarint(append(b, 'i'), int64(x))
	case int64:
		return binary.AppendVarint(append(b, 'i'), x)
	case float64:
		return binary.BigEndian.AppendUint64(append(b, 'f'), math.Float64bits(x))
	case bool:
		if x {
			return append(b, 'T')
		}
		return append(b, 'F')
	case string:
		return appendStr(append(b, 's'), x)
	}
	return appendStr(append(b, 's'), text(k))
}

func readKey(r *bufio.Reader) (any, error) {
	tag, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case 'i':
		return binary.ReadVarint(r)
	case 'f':
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b[:])), nil
	case 'T':
		return true, nil
	case 'F':
		return false, nil
	case 's':
		return readStr(r)
	}
	return nil, fmt.Errorf("bad key tag %d", tag)
}
