package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const scram256 = "SCRAM-SHA-256"

// testCA writes a CA certificate to dir/ca.pem and returns a server TLS
// config for 127.0.0.1 signed by it.
func testCA(t *testing.T, dir string) *tls.Config {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "eos test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	// server.pem is the same key and certificate as a PEM keystore, for
	// Apache Kafka (ssl.keystore.type=PEM wants the key in PKCS#8).
	p8, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	keystore := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})...)
	if err := os.WriteFile(filepath.Join(dir, "server.pem"), keystore, 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}}
}

// grants are the ACLs a worker of app needs, minus the one named by skip.
func grants(app string, skip string) []kfake.ACL {
	all := map[string]kfake.ACL{
		"topic-describe": {Resource: kmsg.ACLResourceTypeTopic, Name: app, Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationDescribe, Allow: true},
		"input-read":     {Resource: kmsg.ACLResourceTypeTopic, Name: app + "-in", Operation: kmsg.ACLOperationRead, Allow: true},
		"output-write":   {Resource: kmsg.ACLResourceTypeTopic, Name: app + "-out", Operation: kmsg.ACLOperationWrite, Allow: true},
		"group-read":     {Resource: kmsg.ACLResourceTypeGroup, Name: app, Operation: kmsg.ACLOperationRead, Allow: true},
		"group-describe": {Resource: kmsg.ACLResourceTypeGroup, Name: app, Operation: kmsg.ACLOperationDescribe, Allow: true},
		"txn-write":      {Resource: kmsg.ACLResourceTypeTransactionalId, Name: app, Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationWrite, Allow: true},
		"txn-describe":   {Resource: kmsg.ACLResourceTypeTransactionalId, Name: app, Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationDescribe, Allow: true},
	}
	var out []kfake.ACL
	for name, a := range all {
		if name != skip {
			if a.Pattern == 0 {
				a.Pattern = kmsg.ACLResourcePatternTypeLiteral
			}
			out = append(out, a)
		}
	}
	return out
}

type secureEnv struct {
	*env
	dir   string
	admin []kgo.Opt // superuser connection
}

// newSecureEnv starts a TLS + SCRAM + ACL broker with one user per app: the
// embedded one, or with EOS_TEST_BROKER=kafka an Apache Kafka node whose
// CLIENT listener is SASL_SSL, with SCRAM users added when its storage is
// formatted and ACLs created through the admin API for the
// StandardAuthorizer.
func newSecureEnv(t *testing.T, users map[string]string) *secureEnv {
	dir := t.TempDir()
	tc := testCA(t, dir)
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	adminOpts := []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha256Mechanism()),
	}
	var e *env
	if testbroker.IsKafka() {
		creds := map[string]string{"admin": "admin-pw"}
		for app := range users {
			creds[app] = app + "-pw"
		}
		c := testbroker.Own(t, kafkacluster.Config{Nodes: 1, ClientOpts: adminOpts,
			Security: &kafkacluster.Security{KeystorePEM: filepath.Join(dir, "server.pem"), Users: creds, SuperUsers: []string{"admin"}}})
		e = newEnvOn(t, c, adminOpts)
		for app, skip := range users {
			createACLs(t, e, app, grants(app, skip))
		}
	} else {
		opts := []kfake.Opt{kfake.TLS(tc), kfake.EnableSASL(), kfake.Superuser(scram256, "admin", "admin-pw"), kfake.EnableACLs()}
		for app, skip := range users {
			opts = append(opts, kfake.User(scram256, app, app+"-pw", grants(app, skip)...))
		}
		e = newEnvWith(t, broker.Config{Opts: opts}, adminOpts)
	}
	return &secureEnv{env: e, dir: dir, admin: append([]kgo.Opt{kgo.SeedBrokers(e.b.Addrs()...)}, adminOpts...)}
}

// createACLs grants user app the acls on Apache Kafka, through the admin
// API as an operator would (kafka-acls.sh).
func createACLs(t *testing.T, e *env, app string, acls []kfake.ACL) {
	t.Helper()
	var bs []*kadm.ACLBuilder
	for _, a := range acls {
		b := kadm.NewACLs().Allow("User:" + app).AllowHosts().Operations(kadm.ACLOperation(a.Operation)).ResourcePatternType(kadm.ACLPattern(a.Pattern))
		switch a.Resource {
		case kmsg.ACLResourceTypeTopic:
			b = b.Topics(a.Name)
		case kmsg.ACLResourceTypeGroup:
			b = b.Groups(a.Name)
		case kmsg.ACLResourceTypeTransactionalId:
			b = b.TransactionalIDs(a.Name)
		default:
			t.Fatalf("no kadm resource for %v", a.Resource)
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		rs, err := kadm.NewClient(e.cl).CreateACLs(e.ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("creating ACLs for %s: %v", app, r.Err)
			}
		}
	}
}

// secureRun runs `eosctl run passthrough` as user app and returns its exit
// code and combined output.
func (s *secureEnv) secureRun(app string, timeout time.Duration, extra ...string) (int, string) {
	args := append([]string{"run", "passthrough", "--brokers", s.b.Addrs()[0], "--app", app, "--instance", "0",
		"--input", app + "-in", "--output", app + "-out", "--tls-ca", filepath.Join(s.dir, "ca.pem"),
		"--sasl-mechanism", scram256, "--sasl-user", app, "--timeout", "5s", "--session-timeout", "3s"}, extra...)
	cmd := exec.Command(eosctl, args...)
	cmd.Env = append(os.Environ(), "EOSCTL_SASL_PASSWORD="+app+"-pw")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Signal(os.Interrupt)
		<-done
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// A worker connected with SCRAM-SHA-256 over TLS copies exactly once, and its
// password appears nowhere in its output.
func TestWorkerOverTLSWithSCRAMIsExactlyOnce(t *testing.T) {
	testenv.Long(t)
	s := newSecureEnv(t, map[string]string{"sec": ""})
	s.produce("sec-in", 20_000, 3, 0)
	if _, _, err := admin.EnsureTopic(s.ctx, s.cl, "sec-out", 3, nil); err != nil {
		t.Fatal(err)
	}
	code, out := s.secureRun("sec", 8*time.Second, "--log-level", "debug")
	if code != 0 {
		t.Fatalf("worker exited %d:\n%s", code, out)
	}
	if strings.Contains(out, "sec-pw") {
		t.Fatal("the SASL password appears in the worker's output")
	}
	rep, err := verify.Run(s.ctx, s.admin, verify.Config{Input: "sec-in", Output: "sec-out", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.InputRecords != 20_000 {
		t.Fatalf("verify over TLS+SCRAM: %s", rep.Summary())
	}
}

// Each missing ACL stops the worker with exit code 4 and one line naming the
// operation and the resource, and nothing is committed: the output holds no
// committed record and the group no committed offset.
func TestMissingACLsAreNamedAndCommitNothing(t *testing.T) {
	cases := map[string]struct{ skip, want string }{
		"notxn":   {"txn-write", `WRITE on TransactionalId "notxn-0"`},
		"nogroup": {"group-read", `READ on Group "nogroup"`},
		"noread":  {"input-read", `READ on Topic "noread-in"`},
		"nowrite": {"output-write", `WRITE on Topic "nowrite-out"`},
	}
	users := map[string]string{}
	for app, c := range cases {
		users[app] = c.skip
	}
	s := newSecureEnv(t, users)
	for app, c := range cases {
		t.Run(app, func(t *testing.T) {
			s.produce(app+"-in", 1000, 1, 0)
			if _, _, err := admin.EnsureTopic(s.ctx, s.cl, app+"-out", 1, nil); err != nil {
				t.Fatal(err)
			}
			code, out := s.secureRun(app, 30*time.Second)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			if code != 4 || !strings.Contains(last, c.want) || !strings.Contains(last, "not authorized") {
				t.Fatalf("exit %d, last line %q; want exit 4 naming %s\n%s", code, last, c.want, out)
			}
			if n, err := admin.EndOffsetSum(s.ctx, s.cl, app+"-out"); err != nil || n != 0 {
				lso, _ := kadm.NewClient(s.cl).ListCommittedOffsets(s.ctx, app+"-out")
				committed := int64(0)
				lso.Each(func(o kadm.ListedOffset) { committed += o.Offset })
				if committed != 0 && n != 0 {
					rep, _ := verify.Run(s.ctx, s.admin, verify.Config{Input: app + "-in", Output: app + "-out", Timeout: 10 * time.Second})
					if rep != nil && rep.OutputRecords > 0 {
						t.Fatalf("%d records committed to the output despite the denial", rep.OutputRecords)
					}
				}
			}
			offs, err := kadm.NewClient(s.cl).FetchOffsets(s.ctx, app)
			if err == nil {
				offs.Each(func(o kadm.OffsetResponse) {
					if o.At > 0 {
						t.Errorf("group %s committed offset %d on %s[%d] despite the denial", app, o.At, o.Topic, o.Partition)
					}
				})
			}
		})
	}
}

// Wrong credentials, a wrong CA and a plaintext client against the TLS
// listener fail with a clear error within the timeout: no hang, no retry storm.
// (Apache Kafka answers wrong credentials with SASL_AUTHENTICATION_FAILED,
// exit code 4; the embedded broker closes the connection instead, which
// eosctl explains.)
func TestBadCredentialsFailFastAndClearly(t *testing.T) {
	s := newSecureEnv(t, map[string]string{"creds": ""})
	other := t.TempDir()
	testCA(t, other) // a CA that did not sign the broker's certificate
	addr := s.b.Addrs()[0]
	// Apache Kafka names the failure (SASL_AUTHENTICATION_FAILED, an
	// authentication failure: exit 4); the embedded broker only closes the
	// connection, and eosctl says what that most likely means (exit 1).
	wrongPassword := struct {
		code int
		has  string
	}{1, "user or password was rejected"}
	if testbroker.IsKafka() {
		wrongPassword.code, wrongPassword.has = 4, "SASL_AUTHENTICATION_FAILED"
	}
	for _, tc := range []struct {
		name string
		args []string
		env  string
		code int
		has  string
	}{
		{"wrong password", []string{"--tls-ca", filepath.Join(s.dir, "ca.pem"), "--sasl-mechanism", scram256, "--sasl-user", "creds"}, "EOSCTL_SASL_PASSWORD=wrong", wrongPassword.code, wrongPassword.has},
		{"wrong CA", []string{"--tls-ca", filepath.Join(other, "ca.pem"), "--sasl-mechanism", scram256, "--sasl-user", "creds"}, "EOSCTL_SASL_PASSWORD=creds-pw", 1, "certificate"},
		{"plaintext against TLS", nil, "", 1, "most likely a TLS listener, while this client does not use TLS"},
		{"mechanism without user", []string{"--sasl-mechanism", scram256}, "", 2, "--sasl-user is required"},
		{"unknown mechanism", []string{"--sasl-mechanism", "KERBEROS", "--sasl-user", "x"}, "EOSCTL_SASL_PASSWORD=x", 2, "want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"verify", "--brokers", addr, "--timeout", "5s", "--input", "a", "--output", "b"}, tc.args...)
			cmd := exec.Command(eosctl, args...)
			cmd.Env = append(os.Environ(), tc.env)
			start := time.Now()
			out, _ := cmd.CombinedOutput()
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("took %s", d)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(lines[len(lines)-1], tc.has) || len(lines) != 1 {
				t.Fatalf("exit %d, output %q; want exit %d and one line containing %q", code, out, tc.code, tc.has)
			}
		})
	}
}
