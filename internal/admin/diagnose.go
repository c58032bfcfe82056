package admin

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// unreachableError is Ping's error: one line naming the likely cause, which
// still wraps ErrUnreachable and the client's own error (so that a SASL
// authentication failure classifies as one) without printing the latter's
// raw "read tcp ...: i/o timeout".
type unreachableError struct {
	msg string
	err error
}

func (e *unreachableError) Error() string   { return e.msg }
func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// explain names the likely cause of err, the failure of a client's first
// request, given what the first seed broker did when probed. The client's
// errors alone cannot tell a TLS mismatch from a port that is not Kafka's,
// nor rejected credentials from a listener without SASL (both close the
// connection).
func explain(cl *kgo.Client, err error, p probeResult, timeout time.Duration) string {
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Sprintf("the broker rejected the user or password (%v)", err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Sprintf("the broker does not enable this SASL mechanism (%v)", err)
	case errors.Is(err, kerr.IllegalSaslState):
		return "the listener does not use SASL, while this client authenticates with SASL"
	}
	mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	switch {
	case p == probeKafka && len(mechs) > 0 && isClosed(err):
		return "the connection closed during SASL authentication: most likely the user or password was rejected"
	case (p == probeSilent || p == probeTLSSilent) && len(seeds) > 0:
		return fmt.Sprintf("no answer within %s: %s %s", timeout, seeds[0], p)
	case p != probeKafka && p != probeUnknown && len(seeds) > 0:
		return seeds[0] + " " + p.String()
	case isTimeout(err):
		return fmt.Sprintf("no answer within %s", timeout)
	}
	return err.Error()
}

// startProbe probes the client's first seed broker in the background, with
// the client's TLS and SASL settings, until deadline.
func startProbe(cl *kgo.Client, deadline time.Time) <-chan probeResult {
	out := make(chan probeResult, 1)
	seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	if len(seeds) == 0 {
		out <- probeUnknown
		return out
	}
	var tc *tls.Config
	if v, ok := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); ok && v != nil {
		tc = v.Clone()
	}
	mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	go func() { out <- probe(seeds[0], tc, len(mechs) > 0, deadline) }()
	return out
}

// probeResult is what a seed broker did when asked directly.
type probeResult int

const (
	probeUnknown   probeResult = iota // the probe itself did not finish in time
	probeKafka                        // it answers Kafka requests; with SASL on, only after authentication
	probeNoSASL                       // it answered a request without SASL authentication, while the client uses SASL
	probeRefused                      // nothing listens there
	probeSilent                       // it accepts connections and does not answer a Kafka request
	probeClosed                       // it closed the connection without a Kafka answer (the client does not use TLS)
	probeTLSSilent                    // it does not answer a TLS handshake
	probeTLSClosed                    // it closed the connection during the TLS handshake
	probeNotKafka                     // it answered, not in the Kafka protocol
)

func (p probeResult) String() string {
	switch p {
	case probeNoSASL:
		return "answers without SASL authentication: the listener does not use SASL, while this client authenticates with SASL"
	case probeRefused:
		return "refuses connections: nothing listens there (wrong host or port?)"
	case probeSilent:
		return "accepts connections but does not answer a Kafka request: most likely not a Kafka listener (wrong port?)"
	case probeClosed:
		return "closed the connection without answering: most likely a TLS listener, while this client does not use TLS"
	case probeTLSSilent:
		return "does not answer a TLS handshake: most likely a plaintext listener, while this client uses TLS"
	case probeTLSClosed:
		return "closed the connection during the TLS handshake: most likely a plaintext listener, while this client uses TLS"
	case probeNotKafka:
		return "answers, but not in the Kafka protocol: not a Kafka listener (wrong port?)"
	}
	return "answers Kafka requests"
}

// probe connects to addr (with TLS if tc is set) and sends ApiVersions,
// which every Kafka listener answers before authentication; with
// withSASL, it then sends Metadata without authenticating, which only a
// listener without SASL answers.
func probe(addr string, tc *tls.Config, withSASL bool, deadline time.Time) probeResult {
	if time.Until(deadline) <= 0 {
		return probeUnknown
	}
	c, err := (&net.Dialer{Deadline: deadline}).Dial("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return probeRefused
		}
		return probeUnknown
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	if tc != nil {
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tlc := tls.Client(c, tc)
		if err := tlc.Handshake(); err != nil {
			switch {
			case isTimeout(err):
				return probeTLSSilent
			case isClosed(err), errors.As(err, new(tls.RecordHeaderError)):
				return probeTLSClosed
			}
			return probeUnknown
		}
		c = tlc
	}
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(0)
	if err := roundTrip(c, versions, 1); err != nil {
		var tlsAlert errTLSAlert
		switch {
		case isTimeout(err) && tc == nil:
			return probeSilent
		case (isClosed(err) || errors.As(err, &tlsAlert)) && tc == nil:
			return probeClosed
		case errors.Is(err, errNotKafka):
			return probeNotKafka
		}
		return probeUnknown
	}
	if !withSASL {
		return probeKafka
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(1)
	meta.Topics = []kmsg.MetadataRequestTopic{}
	if err := roundTrip(c, meta, 2); err == nil {
		return probeNoSASL
	}
	return probeKafka
}

// roundTrip writes req with a version 1 request header and reads one
// response frame, without decoding its body.
func roundTrip(c net.Conn, req kmsg.Request, correlationID int32) error {
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
	body = binary.BigEndian.AppendUint32(body, uint32(correlationID))
	body = binary.BigEndian.AppendUint16(body, uint16(len("eosctl-probe")))
	body = append(body, "eosctl-probe"...)
	body = req.AppendTo(body)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := c.Write(append(frame, body...)); err != nil {
		return err
	}
	var head [8]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	if head[0] == 0x15 && head[1] == 0x03 { // a TLS alert record
		return errTLSAlert{}
	}
	size := int64(binary.BigEndian.Uint32(head[:4]))
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != correlationID || size < 4 || size > 1<<20 {
		return fmt.Errorf("answer of %d bytes with correlation id %d, want %d: %w", size, got, correlationID, errNotKafka)
	}
	_, err := io.CopyN(io.Discard, c, size-4)
	return err
}

// errNotKafka is an answer that is not a Kafka response.
var errNotKafka = errors.New("not a Kafka answer")

// errTLSAlert is a TLS alert in answer to a plaintext request.
type errTLSAlert struct{}

func (errTLSAlert) Error() string { return "a TLS alert" }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
