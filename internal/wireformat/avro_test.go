package wireformat

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

const v1 = `{"type":"record","name":"Order","fields":[
 {"name":"id","type":"long"},{"name":"user","type":"string"},
 {"name":"amount","type":"double"},{"name":"status","type":{"type":"enum","name":"S","symbols":["NEW","PAID"]}},
 {"name":"note","type":["null","string"],"default":null}]}`

// v2 adds a field with a default: it reads what v1 wrote.
const v2 = `{"type":"record","name":"Order","fields":[
 {"name":"id","type":"long"},{"name":"user","type":"string"},
 {"name":"amount","type":"double"},{"name":"status","type":{"type":"enum","name":"S","symbols":["NEW","PAID"]}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"currency","type":"string","default":"EUR"}]}`

func wire(t *testing.T, cl *sr.Client, subject, text string, v any) []byte {
	t.Helper()
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: text})
	if err != nil {
		t.Fatal(err)
	}
	b, err := avro.Marshal(avro.MustParse(text), v)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID)), b...)
}

func fake(t testing.TB) *sr.Client {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	cl, err := NewClient(Registry{URL: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestDecodeResolvesWriterSchemasAgainstTheReader(t *testing.T) {
	cl := fake(t)
	ctx := context.Background()
	rec := map[string]any{"id": int64(7), "user": "ann \"x\"", "amount": 12.5, "status": "PAID", "note": nil}
	old := wire(t, cl, "o-value", v1, rec)
	rec2 := map[string]any{"id": int64(8), "user": "bob", "amount": 3.0, "status": "NEW", "note": "hi", "currency": "USD"}
	newer := wire(t, cl, "o-value", v2, rec2)

	d := NewAvroDecoder(cl, nil, nil)
	js, err := d.AppendJSON(ctx, nil, old)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":7,"user":"ann \"x\"","amount":12.5,"status":"PAID","note":null}`; string(js) != want {
		t.Fatalf("writer schema: %s, want %s", js, want)
	}
	d = NewAvroDecoder(cl, avro.MustParse(v2), nil)
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{old, `{"id":7,"user":"ann \"x\"","amount":12.5,"status":"PAID","note":null,"currency":"EUR"}`},
		{newer, `{"id":8,"user":"bob","amount":3,"status":"NEW","note":"hi","currency":"USD"}`},
	} {
		js, err := d.AppendJSON(ctx, nil, c.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(js) != c.want {
			t.Fatalf("got %s, want %s", js, c.want)
		}
	}
	// Round trip through the encoder: the independent decoder (hamba with
	// the schema) reads back what the JSON said.
	e, err := NewAvroEncoder(avro.MustParse(v2))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(ctx, cl, "out"); err != nil {
		t.Fatal(err)
	}
	b, err := e.Append(nil, "out", []byte(`{"user":"bob","id":8,"amount":3,"status":"NEW","note":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := avro.Unmarshal(avro.MustParse(v2), b[5:], &got); err != nil {
		t.Fatal(err)
	}
	if got["currency"] != "EUR" || got["id"] != int64(8) || got["amount"] != 3.0 {
		t.Fatalf("encoded %v", got)
	}
}

func TestBadRecordsAreBadDataWithTheirReason(t *testing.T) {
	cl := fake(t)
	ctx := context.Background()
	good := wire(t, cl, "b-value", v1, map[string]any{"id": int64(1), "user": "u", "amount": 1.0, "status": "NEW", "note": nil})
	d := NewAvroDecoder(cl, nil, nil)
	e, _ := NewAvroEncoder(avro.MustParse(v1))
	if err := e.Register(ctx, cl, "b"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		err    func() error
		reason string
	}{
		"json":      {func() error { _, err := d.AppendJSON(ctx, nil, []byte(`{"a":1}`)); return err }, "wire-format"},
		"short":     {func() error { _, err := d.AppendJSON(ctx, nil, []byte{0, 0}); return err }, "wire-format"},
		"truncated": {func() error { _, err := d.AppendJSON(ctx, nil, good[:len(good)-3]); return err }, "avro-decode"},
		"missing":   {func() error { _, err := e.Append(nil, "b", []byte(`{"id":1}`)); return err }, "avro-encode"},
		"type": {func() error {
			_, err := e.Append(nil, "b", []byte(`{"id":"x","user":"u","amount":1,"status":"NEW"}`))
			return err
		}, "avro-encode"},
		"symbol": {func() error {
			_, err := e.Append(nil, "b", []byte(`{"id":1,"user":"u","amount":1,"status":"GONE"}`))
			return err
		}, "avro-encode"},
	} {
		var bd *BadDataError
		if err := c.err(); !errors.As(err, &bd) || bd.Reason != c.reason {
			t.Errorf("%s: %v, want a BadDataError %s", name, err, c.reason)
		}
	}
}

func TestIncompatibleOutputSchemaNamesSubjectAndField(t *testing.T) {
	cl := fake(t)
	ctx := context.Background()
	e, _ := NewAvroEncoder(avro.MustParse(v1))
	if err := e.Register(ctx, cl, "c"); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(v2, `"type":"string","default":"EUR"`, `"type":"string"`, 1)
	e2, _ := NewAvroEncoder(avro.MustParse(bad))
	err := e2.Register(ctx, cl, "c")
	if !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "c-value") || !strings.Contains(err.Error(), `"currency"`) {
		t.Fatalf("got %v, want a config error naming c-value and currency", err)
	}
	bad = strings.Replace(v1, `{"name":"amount","type":"double"}`, `{"name":"amount","type":"string"}`, 1)
	e3, _ := NewAvroEncoder(avro.MustParse(bad))
	if err := e3.Register(ctx, cl, "c"); err == nil || !strings.Contains(err.Error(), `"amount"`) {
		t.Fatalf("got %v, want an error naming amount", err)
	}
}

func TestUnreachableRegistryIsRetriedNotBadData(t *testing.T) {
	cl, err := NewClient(Registry{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	_, err = NewAvroDecoder(cl, nil, nil).AppendJSON(ctx, nil, []byte{0, 0, 0, 0, 9, 2})
	var bd *BadDataError
	if errors.As(err, &bd) || !errors.Is(err, eos.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable after retrying", err)
	}
}
