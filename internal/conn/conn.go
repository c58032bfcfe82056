// Package conn turns connection settings (seed brokers, TLS, SASL) into
// franz-go client options, so that every eosctl command, worker and demo
// connects to a secured cluster the same way.
package conn

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"strings"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Every error about the settings themselves is an *eos.ConfigError.

// Config holds the connection settings. The zero value (with Brokers set)
// connects in plaintext without authentication.
type Config struct {
	Brokers []string

	// TLS enables TLS; it is implied by any of the other TLS fields.
	TLS bool
	// TLSCA is a PEM file of CAs to trust instead of the system pool.
	TLSCA string
	// TLSCert and TLSKey are a PEM client certificate and key for mutual TLS.
	TLSCert, TLSKey string
	// TLSInsecureSkipVerify disables server certificate verification. It
	// exists for throwaway test clusters and is logged loudly.
	TLSInsecureSkipVerify bool

	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty means
	// no SASL.
	SASLMechanism string
	SASLUser      string
	// SASLPassword is never logged nor printed.
	SASLPassword string
}

// String describes the settings without the password.
func (c Config) String() string {
	s := "brokers=" + strings.Join(c.Brokers, ",")
	if c.tlsOn() {
		s += " tls"
	}
	if c.SASLMechanism != "" {
		s += " sasl=" + c.SASLMechanism + " user=" + c.SASLUser
	}
	return s
}

func (c Config) tlsOn() bool {
	return c.TLS || c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != "" || c.TLSInsecureSkipVerify
}

// Opts validates the settings and returns the client options. log receives
// the warning about skipped certificate verification; nil uses slog's default.
func (c Config) Opts(log *slog.Logger) ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, eos.BadConfig("conn.Config", "no seed brokers")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.tlsOn() {
		tc, err := c.tlsConfig(log)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASLMechanism != "" || c.SASLUser != "" {
		m, err := c.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (c Config) tlsConfig(log *slog.Logger) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, eos.BadConfig("conn.Config", "--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, eos.BadConfig("conn.Config", "--tls-ca %s holds no PEM certificate", c.TLSCA)
		}
		tc.RootCAs = pool
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, eos.BadConfig("conn.Config", "--tls-cert and --tls-key go together")
	}
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, eos.BadConfig("conn.Config", "--tls-cert/--tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if c.TLSInsecureSkipVerify {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("TLS CERTIFICATE VERIFICATION IS DISABLED (--tls-insecure-skip-verify): anyone on the network path can impersonate the brokers and read or alter every record; never use this outside a throwaway test cluster")
		tc.InsecureSkipVerify = true
	}
	return tc, nil
}

func (c Config) mechanism() (sasl.Mechanism, error) {
	if c.SASLUser == "" {
		return nil, eos.BadConfig("conn.Config", "--sasl-user is required with --sasl-mechanism")
	}
	if c.SASLPassword == "" {
		return nil, eos.BadConfig("conn.Config", "a SASL password is required (--sasl-password or EOSCTL_SASL_PASSWORD)")
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "PLAIN":
		return plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism(), nil
	case "":
		return nil, eos.BadConfig("conn.Config", "--sasl-user needs --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
	}
	return nil, eos.BadConfig("conn.Config", "--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
}
