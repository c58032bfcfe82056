package sink_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A mapping from JSON payment records to rows of payments, keyed by the
// record's out_trade_no.
func ExampleParseMapping() {
	m, err := sink.ParseMapping("payments.yaml", []byte(`
table: payments
key_column: out_trade_no
key: out_trade_no
columns:
  user_id: user
  amount_cents: int(amount * 100)
`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Table, m.KeyColumn, m.Mode, len(m.Columns))
	// Output: payments out_trade_no insert 2
}

// Run a sink until SIGTERM: the batch in flight is committed or rolled
// back, and the next start resumes from the offsets in the database.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	m, err := sink.LoadMapping("payments.yaml")
	if err != nil {
		log.Fatal(err)
	}
	s, err := sink.New(ctx, sink.Config{
		DSN:        "postgres://app:secret@127.0.0.1:5432/shop?sslmode=disable",
		Group:      "payments-sink",
		Topics:     []string{"payments"},
		Mapping:    m,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")},
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, eos.ErrConfig) or sink.ErrAuth: fix the input
	}
	defer s.Close()
	if err := s.Run(ctx); err != nil {
		log.Fatal(err) // restart: it resumes from the database's offsets
	}
}
