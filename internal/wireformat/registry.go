// Package wireformat reads and writes records in the Confluent wire format
// (a zero magic byte, a 4-byte big-endian schema id, then the payload: Avro
// binary, Protobuf, or a JSON document) against a Schema Registry's
// Confluent-compatible API, and transcodes between that and the JSON
// objects the topologies evaluate (JSON Schema records are only validated:
// their payload is the JSON).
//
// Schemas are fetched once per id and kept: there is no registry call per
// record. A record whose schema id is new is fetched when it first arrives;
// if the registry cannot be reached then, the fetch is retried until it
// answers or the context ends (the record is never dead-lettered for it),
// which is what ErrUnreachable-wrapped errors from Decode mean.
//
// What can go wrong: a record that is not in the wire format, whose payload
// does not decode with its writer schema, or whose writer schema cannot be
// read as the reader schema, is a *BadDataError (the topologies dead-letter
// it with Reason); an output value that does not fit the output schema is
// one too (reason avro-encode, protobuf-encode, json-schema-encode; a JSON
// Schema record not valid against its writer schema is json-schema-invalid).
// An id the registry does not know (HTTP 404)
// is retried for UnknownIDWait, since a registry being restored may not know
// it yet, and then is bad data (reason unknown-schema-id).
package wireformat

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/sr"
)

// Registry says how to reach a Schema Registry.
type Registry struct {
	// URL of the Confluent-compatible API, e.g.
	// http://127.0.0.1:8081/apis/ccompat/v7 for Apicurio, or
	// http://127.0.0.1:8081 for Confluent's registry.
	URL string
	// TLS: a PEM CA file to trust instead of the system's, and a client
	// certificate and key for mutual TLS.
	CA, Cert, Key string
	// Basic auth.
	User, Password string
}

// NewClient builds a registry client; bad TLS files are config errors.
func NewClient(r Registry) (*sr.Client, error) {
	if r.URL == "" {
		return nil, eos.BadConfig("SchemaRegistry.URL", "a schema registry URL is needed for avro (--schema-registry or EOSCTL_SCHEMA_REGISTRY)")
	}
	opts := []sr.ClientOpt{sr.URLs(r.URL), sr.UserAgent("eosctl")}
	if r.CA != "" || r.Cert != "" || r.Key != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if r.CA != "" {
			pem, err := os.ReadFile(r.CA)
			if err != nil {
				return nil, eos.BadConfig("SchemaRegistry.CA", "%v", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, eos.BadConfig("SchemaRegistry.CA", "%s holds no PEM certificate", r.CA)
			}
		}
		if r.Cert != "" || r.Key != "" {
			c, err := tls.LoadX509KeyPair(r.Cert, r.Key)
			if err != nil {
				return nil, eos.BadConfig("SchemaRegistry.Cert", "client certificate and key: %v", err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		opts = append(opts, sr.DialTLSConfig(tc))
	}
	if r.User != "" {
		opts = append(opts, sr.BasicAuth(r.User, r.Password))
	}
	opts = append(opts, sr.HTTPClient(&http.Client{Timeout: 10 * time.Second}))
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, eos.BadConfig("SchemaRegistry.URL", "%v", err)
	}
	return cl, nil
}

// BadDataError is a record that cannot be read or written in the wire
// format: the caller dead-letters it with Reason.
type BadDataError struct {
	Reason string // wire-format, avro-decode, avro-encode, unknown-schema-id
	Err    error
}

func (e *BadDataError) Error() string { return e.Err.Error() }
func (e *BadDataError) Unwrap() error { return e.Err }

func bad(reason, format string, args ...any) error {
	return &BadDataError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// UnknownIDWait is how long an id the registry answers 404 for is asked
// again before its record is bad data.
var UnknownIDWait = time.Minute

// retryBackoff paces the retries of a registry that does not answer.
const retryBackoff = 500 * time.Millisecond

// fetch gets schema id, retrying while the registry is unreachable (until
// ctx ends) or does not know the id (for UnknownIDWait).
func fetch(ctx context.Context, cl *sr.Client, id int, warn func(string, ...any)) (sr.Schema, error) {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		s, err := cl.SchemaByID(ctx, id)
		if err == nil {
			return s, nil
		}
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound && time.Since(start) > UnknownIDWait {
			return s, bad("unknown-schema-id", "schema id %d: the registry does not know it (asked for %s): %v", id, UnknownIDWait, err)
		}
		if attempt%10 == 0 && warn != nil {
			warn("schema registry: fetching schema id %d failed, retrying: %v", id, err)
		}
		select {
		case <-ctx.Done():
			return s, unreachable("fetching schema id %d: %v (last: %v)", id, ctx.Err(), err)
		case <-time.After(retryBackoff):
		}
	}
}

// unreachableError is a registry that did not answer: it matches
// eos.ErrUnreachable, with its own message (that one speaks of brokers).
type unreachableError struct{ msg string }

func (e *unreachableError) Error() string        { return e.msg }
func (e *unreachableError) Is(target error) bool { return target == eos.ErrUnreachable }

func unreachable(format string, args ...any) error {
	return &unreachableError{"schema registry unreachable: " + fmt.Sprintf(format, args...)}
}

// latestSchema returns the latest version under subject; found is false if
// the subject has none. A registry that does not answer is unreachable.
func latestSchema(ctx context.Context, cl *sr.Client, subject string) (latest sr.SubjectSchema, found bool, err error) {
	latest, err = cl.SchemaByVersion(ctx, subject, -1)
	var re *sr.ResponseError
	switch {
	case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
		return latest, false, nil
	case err != nil:
		return latest, false, unreachable("subject %s: %v", subject, err)
	}
	return latest, true, nil
}

// createSchema registers s under subject and returns its id. A schema the
// registry refuses (409, 422: its compatibility rule, or the schema itself)
// is an eos.ErrConfig naming the subject, and the field if the registry
// names one.
func createSchema(ctx context.Context, cl *sr.Client, subject string, s sr.Schema) (uint32, error) {
	ss, err := cl.CreateSchema(ctx, subject, s)
	var re *sr.ResponseError
	switch {
	case errors.As(err, &re) && (re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity):
		return 0, eos.BadConfig("output_schema", "the registry refuses it under subject %s%s: %s", subject, fieldOf(err.Error()), oneLine(err))
	case err != nil:
		return 0, unreachable("registering under %s: %v", subject, err)
	}
	return uint32(ss.ID), nil
}

// registryIncompatible asks the registry whether s is compatible with the
// latest version under subject, by the subject's compatibility level, and
// returns why not, or "" (compatible, or no answer: registering asks
// again). Apicurio answers with "reason", Confluent with "messages".
func registryIncompatible(ctx context.Context, cl *sr.Client, subject string, s sr.Schema) string {
	var res struct {
		Is       bool     `json:"is_compatible"`
		Messages []string `json:"messages"`
		Reason   string   `json:"reason"`
	}
	path := "/compatibility/subjects/" + url.PathEscape(subject) + "/versions/latest"
	if err := cl.Do(sr.WithParams(ctx, sr.Verbose), http.MethodPost, path, s, &res); err != nil || res.Is {
		return ""
	}
	why := strings.Join(append(res.Messages, res.Reason), "; ")
	return strings.TrimSpace(strings.Trim(why, "; "))
}
