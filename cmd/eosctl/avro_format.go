package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/twmb/franz-go/pkg/sr"
)

// registryClient connects to the Schema Registry the flags name.
func (g *globals) registryClient() (*sr.Client, error) {
	r := g.schemaRegistry()
	return wireformat.NewClient(wireformat.Registry{URL: r.URL, CA: r.TLSCA, Cert: r.TLSCert, Key: r.TLSKey, User: r.User, Password: r.Password})
}

// orderSchemas are the schemas of datagen's orders, by format: what
// produce --format writes without --schema.
var orderSchemas = map[wireformat.Kind]string{
	wireformat.Avro:       datagen.AvroSchema,
	wireformat.JSONSchema: datagen.JSONSchema,
	wireformat.Protobuf:   datagen.ProtoSchema,
}

// formatNames lists --format's values: "json, avro".
func formatNames() string {
	return strings.Join(append([]string{string(wireformat.JSON)}, kindNames()...), ", ")
}

// checkFormat refuses a --format that is not json or a wire format.
func checkFormat(format string) error {
	k := wireformat.Kind(format)
	switch {
	case k == wireformat.JSON || wireformat.Lookup(k) != nil:
		return nil
	case k == wireformat.Avro || k == wireformat.Protobuf || k == wireformat.JSONSchema:
		return usage(fmt.Errorf("--format %s is not supported yet (%s)", format, formatNames()))
	}
	return usage(fmt.Errorf("--format: want one of %s, got %q", formatNames(), format))
}

// wireEncoder registers the schema in file (datagen's order schema of that
// format if empty) under topic's subject and returns an encoder of JSON
// values to wire-format records of it.
func (g *globals) wireEncoder(ctx context.Context, k wireformat.Kind, topic, file string) (func([]byte) ([]byte, error), error) {
	cl, err := g.registryClient()
	if err != nil {
		return nil, err
	}
	f := wireformat.Lookup(k)
	text, path := []byte(orderSchemas[k]), "order"+f.SchemaExt()
	if file != "" {
		if text, err = os.ReadFile(file); err != nil {
			return nil, usage(fmt.Errorf("--schema: %w", err))
		}
		path = file
	}
	s, err := f.Parse(path, text, "")
	if err != nil {
		return nil, usage(fmt.Errorf("--schema %s: %w", path, err))
	}
	enc, err := f.NewEncoder(s)
	if err != nil {
		return nil, usage(fmt.Errorf("--schema %s: %w", path, err))
	}
	if err := enc.Register(ctx, cl, topic); err != nil {
		return nil, err
	}
	return func(js []byte) ([]byte, error) { return enc.Append(nil, topic, js) }, nil
}

// kindNames lists the wire formats: avro, ...
func kindNames() []string {
	var names []string
	for _, k := range wireformat.Kinds() {
		names = append(names, string(k))
	}
	return names
}
