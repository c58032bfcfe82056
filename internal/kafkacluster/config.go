package kafkacluster

import (
	"fmt"
	"github.com/eosctl/eos/broker"
	"github.com/twmb/franz-go/pkg/kgo"
	"maps"
	"slices"
	"strings"
	"time"
)

// Config describes a cluster to start. The zero value is usable: three
// combined broker+controller nodes of DefaultVersion on free loopback ports,
// in a temporary directory removed by Stop.
type Config struct {
	// Version is the Apache Kafka release; empty means DefaultVersion.
	Version string

	// Nodes is the number of combined broker+controller nodes; 0 means 3.
	// With 3 or more, the transaction and offsets logs and every topic get
	// replication factor 3 and min.insync.replicas 2, as production
	// clusters that run exactly-once do; with fewer, factor 1.
	Nodes int

	// Dir holds each node's configuration, data and logs. Empty means a new
	// temporary directory, removed by Stop unless Detach is set.
	Dir string

	// Host is the loopback address to listen on; empty means 127.0.0.1.
	Host string

	// Ports are the client ports of the nodes in node order (the first
	// node gets Ports[0]). Missing or zero entries get free ports.
	Ports []int

	// Proxy puts a fault proxy in front of every node's client listener and
	// advertises the proxy's address, so clients reach the brokers only
	// through it (see Cluster.Faults and Proxy.Cut); replication and the
	// quorum go through plain proxies of their own, so that Node.Isolate
	// can partition a node from its peers too. Not with Detach: the
	// proxies live in this process.
	Proxy bool

	// Faults is the injector every proxy consults; nil with Proxy means a
	// new one (Cluster.Faults returns it). Setting it implies Proxy.
	Faults *broker.Faults

	// Security, if set, makes the CLIENT listener SASL_SSL with SCRAM users
	// and the StandardAuthorizer (ACLs), as a secured production cluster
	// is. Not with Proxy.
	Security *Security

	// ClientOpts are how the launcher itself connects to the CLIENT
	// listener (TLS and SASL with Security), to wait for the nodes and
	// to Clear.
	ClientOpts []kgo.Opt

	// Heap is the JVM heap of each node (-Xmx); empty means 512m, which
	// fits three nodes beside the tests on a 2-core, 24 GiB machine.
	Heap string

	// BrokerConfigs are set on every node after the launcher's own
	// settings, overriding them (for example transaction.max.timeout.ms).
	BrokerConfigs map[string]string

	// Detach leaves the nodes running when this process exits: they start
	// in their own session, and Stop(Dir) or StopDir stops them by PID.
	// The script behind `make kafka` uses it.
	Detach bool

	// StartTimeout bounds the wait for every node to answer metadata;
	// 0 means 2 minutes (a cold JVM on a busy 2-core machine is slow).
	StartTimeout time.Duration

	// Logf receives progress lines (resolving, formatting, waiting); nil
	// discards them.
	Logf func(format string, args ...any)

	// afterLayout, if set, runs once the ports are chosen, before the
	// nodes start: a test's way to take one of them, as another process
	// could.
	afterLayout func(*Cluster)
}

func (c Config) withDefaults() Config {
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Heap == "" {
		c.Heap = "512m"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.Faults != nil {
		c.Proxy = true
	}
	if c.Proxy && c.Faults == nil {
		c.Faults = &broker.Faults{}
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 9:
		return fmt.Errorf("kafkacluster: Nodes must be between 1 and 9, got %d", c.Nodes)
	case len(c.Ports) > c.Nodes:
		return fmt.Errorf("kafkacluster: %d Ports for %d Nodes", len(c.Ports), c.Nodes)
	case c.Security != nil && c.Proxy:
		return fmt.Errorf("kafkacluster: Security cannot be combined with Proxy: the proxies parse plaintext Kafka frames")
	case c.Security != nil && c.Security.KeystorePEM == "":
		return fmt.Errorf("kafkacluster: Security.KeystorePEM is required")
	case c.Proxy && c.Detach:
		return fmt.Errorf("kafkacluster: Proxy cannot be combined with Detach: the proxies live in the starting process")
	}
	return nil
}

// Security describes a secured CLIENT listener.
type Security struct {
	// KeystorePEM is a file holding the listener's PKCS#8 private key
	// (unencrypted) and its certificate chain, PEM encoded.
	KeystorePEM string
	// Users are SCRAM credentials, name to password, created for both
	// SCRAM-SHA-256 and SCRAM-SHA-512 when the storage is formatted.
	Users map[string]string
	// SuperUsers bypass the ACLs (the brokers' own INTERNAL and
	// CONTROLLER listeners are plaintext and always do, as ANONYMOUS).
	SuperUsers []string
}

// scramMechanisms are the SASL mechanisms a secured listener offers.
var scramMechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}

// replication returns the replication factor and min ISR for n nodes.
func replication(n int) (rf, minISR int) {
	if n >= 3 {
		return 3, 2
	}
	return 1, 1
}

// serverProperties renders node's server.properties.
func serverProperties(c Config, n *Node, all []*Node) string {
	rf, isr := replication(c.Nodes)
	voters := make([]string, len(all))
	for i, o := range all {
		voters[i] = fmt.Sprintf("%d@%s", o.ID, o.controllerAddr)
	}
	p := map[string]string{
		"process.roles":                  "broker,controller",
		"node.id":                        fmt.Sprint(n.ID),
		"controller.quorum.voters":       strings.Join(voters, ","),
		"listeners":                      fmt.Sprintf("CLIENT://%s:%d,INTERNAL://%s:%d,CONTROLLER://%s:%d", c.Host, n.clientPort, c.Host, n.internalPort, c.Host, n.controllerPort),
		"advertised.listeners":           fmt.Sprintf("CLIENT://%s,INTERNAL://%s", n.Addr, n.internalAddr),
		"listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":     "INTERNAL",
		"controller.listener.names":      "CONTROLLER",
		"log.dirs":                       n.dataDir(),
		"share.coordinator.state.topic.replication.factor": fmt.Sprint(rf),
		"share.coordinator.state.topic.min.isr":            fmt.Sprint(isr),
		// Fewer internal partitions than the default 50 start faster on
		// 2 cores; the coordinators still spread over every node.
		"offsets.topic.num.partitions":         "12",
		"transaction.state.log.num.partitions": "12",
		// Lets tests and demos expire classic-group members in seconds
		// (the default minimum is 6 s); it does not change any default.
		"group.min.session.timeout.ms":             "1000",
		"group.consumer.min.session.timeout.ms":    "1000",
		"group.consumer.min.heartbeat.interval.ms": "500",
		"num.io.threads":                           "4",
		"num.network.threads":                      "2",
		"num.recovery.threads.per.data.dir":        "1",
	}
	if sec := c.Security; sec != nil {
		p["listener.security.protocol.map"] = "CLIENT:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
		p["sasl.enabled.mechanisms"] = strings.Join(scramMechanisms, ",")
		for _, m := range scramMechanisms {
			p["listener.name.client."+strings.ToLower(m)+".sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		}
		p["listener.name.client.ssl.keystore.type"] = "PEM"
		p["listener.name.client.ssl.keystore.location"] = sec.KeystorePEM
		p["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		supers := []string{"User:ANONYMOUS"}
		for _, u := range sec.SuperUsers {
			supers = append(supers, "User:"+u)
		}
		p["super.users"] = strings.Join(supers, ";")
	}
	maps.Copy(p, ExactlyOnceSettings(c.Nodes))
	maps.Copy(p, c.BrokerConfigs)
	var b strings.Builder
	b.WriteString("# written by eos's kafkacluster launcher\n")
	for _, k := range slices.Sorted(maps.Keys(p)) {
		fmt.Fprintf(&b, "%s=%s\n", k, p[k])
	}
	return b.String()
}

// ExactlyOnceSettings are the broker settings a cluster of n nodes needs
// for exactly-once to survive the loss of a node, as the launcher sets
// them; the docker-compose stack sets the same (deploy's tests check).
func ExactlyOnceSettings(n int) map[string]string {
	rf, isr := replication(n)
	return map[string]string{
		"offsets.topic.replication.factor":         fmt.Sprint(rf),
		"transaction.state.log.replication.factor": fmt.Sprint(rf),
		"transaction.state.log.min.isr":            fmt.Sprint(isr),
		"default.replication.factor":               fmt.Sprint(rf),
		"min.insync.replicas":                      fmt.Sprint(isr),
		"group.initial.rebalance.delay.ms":         "0",
		// Topics are created on purpose, as on most production clusters;
		// a typo in a topic name fails instead of creating a topic.
		"auto.create.topics.enable": "false",
	}
}

// log4j2Properties sends each node's log to server.log in its directory.
const log4j2Properties = `status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
`
