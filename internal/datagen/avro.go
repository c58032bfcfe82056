package datagen

import _ "embed"

// AvroSchema is the Avro schema of [Value]'s records (the pad field
// defaults to "" for values too small to have one), which eosctl produce
// --format avro registers and writes them with; topologies/examples has
// the same file as order.avsc.
//
//go:embed order.avsc
var AvroSchema string
