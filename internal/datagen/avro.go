package datagen

import _ "embed"

// AvroSchema is the Avro schema of [Value]'s records (the pad field
// defaults to "" for values too small to have one), which eosctl produce
// --format avro registers and writes them with; topologies/examples has
// the same file as order.avsc.
//
//go:embed order.avsc
var AvroSchema string

// JSONSchema is the JSON Schema (draft-07) of [Value]'s records, which
// eosctl produce --format json-schema registers and writes them with;
// topologies/examples has the same file as order.schema.json.
//
//go:embed order.schema.json
var JSONSchema string

// ProtoSchema is the .proto file of [Value]'s records (message Order),
// which eosctl produce --format protobuf registers and writes them with;
// topologies/examples has the same file as order.proto.
//
//go:embed order.proto
var ProtoSchema string
