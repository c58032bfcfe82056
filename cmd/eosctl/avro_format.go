package main

import (
	"context"
	"fmt"
	"os"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/twmb/franz-go/pkg/sr"
)

// registryClient connects to the Schema Registry the flags name.
func (g *globals) registryClient() (*sr.Client, error) {
	r := g.schemaRegistry()
	return wireformat.NewClient(wireformat.Registry{URL: r.URL, CA: r.TLSCA, Cert: r.TLSCert, Key: r.TLSKey, User: r.User, Password: r.Password})
}

// checkFormat refuses a --format other than json and avro.
func checkFormat(format string) error {
	switch format {
	case "json", "avro":
		return nil
	case "protobuf", "json-schema":
		return usage(fmt.Errorf("--format %s is not supported yet (json or avro)", format))
	}
	return usage(fmt.Errorf("--format: want json or avro, got %q", format))
}

// avroEncoder registers the schema in file (datagen's order schema if
// empty) under topic's subject and returns an encoder of JSON values to
// wire-format Avro records of it.
func (g *globals) avroEncoder(ctx context.Context, topic, file string) (func([]byte) ([]byte, error), error) {
	cl, err := g.registryClient()
	if err != nil {
		return nil, err
	}
	text := datagen.AvroSchema
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usage(fmt.Errorf("--schema: %w", err))
		}
		text = string(b)
	}
	s, err := wireformat.ParseSchema(text)
	if err != nil {
		return nil, usage(fmt.Errorf("--schema %s: not an Avro schema: %w", file, err))
	}
	enc, err := wireformat.NewEncoder(s)
	if err != nil {
		return nil, usage(fmt.Errorf("--schema %s: %w", file, err))
	}
	if err := enc.Register(ctx, cl, topic); err != nil {
		return nil, err
	}
	return func(js []byte) ([]byte, error) { return enc.Append(nil, topic, js) }, nil
}
