package main

import (
	"os"

	"github.com/eosctl/eos/topologies"
	"github.com/spf13/pflag"
)

// schemaRegistryFlags adds the flags that say how to reach a Schema
// Registry: topologies with a wire format, produce and consume --format.
func schemaRegistryFlags(pf *pflag.FlagSet, r *topologies.SchemaRegistry) {
	pf.StringVar(&r.URL, "schema-registry", envOr("EOSCTL_SCHEMA_REGISTRY", ""), "Schema Registry URL (Confluent-compatible API; for Apicurio .../apis/ccompat/v7) for Avro, Protobuf and JSON Schema topics (env EOSCTL_SCHEMA_REGISTRY)")
	pf.StringVar(&r.TLSCA, "schema-registry-ca", envOr("EOSCTL_SCHEMA_REGISTRY_CA", ""), "PEM file of CAs to trust for the Schema Registry (env EOSCTL_SCHEMA_REGISTRY_CA)")
	pf.StringVar(&r.TLSCert, "schema-registry-cert", envOr("EOSCTL_SCHEMA_REGISTRY_CERT", ""), "PEM client certificate for the Schema Registry (env EOSCTL_SCHEMA_REGISTRY_CERT)")
	pf.StringVar(&r.TLSKey, "schema-registry-key", envOr("EOSCTL_SCHEMA_REGISTRY_KEY", ""), "PEM client key for the Schema Registry (env EOSCTL_SCHEMA_REGISTRY_KEY)")
	pf.StringVar(&r.User, "schema-registry-user", envOr("EOSCTL_SCHEMA_REGISTRY_USER", ""), "basic-auth user for the Schema Registry; the password comes from EOSCTL_SCHEMA_REGISTRY_PASSWORD (env EOSCTL_SCHEMA_REGISTRY_USER)")
}

// schemaRegistry returns the registry settings, with the password from the
// environment (never a flag, which ps would show).
func (g *globals) schemaRegistry() topologies.SchemaRegistry {
	r := g.registry
	r.Password = os.Getenv("EOSCTL_SCHEMA_REGISTRY_PASSWORD")
	return r
}
