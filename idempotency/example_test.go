package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"log"

	"github.com/eosctl/eos/idempotency"
)

// Charge a payment once per out_trade_no, however often the record that
// asks for it is delivered.
func ExampleStore_Do() {
	ctx := context.Background()
	var db *sql.DB // a pgx or go-sql-driver/mysql pool
	store, err := idempotency.Open(ctx, db, idempotency.Config{})
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := store.Do(ctx, "payment", "out-trade-no-42", func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
		// Write the charge through tx: it commits with the record.
		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 100 WHERE id = 7"); err != nil {
			return nil, err // rolled back; the key is free for a retry
		}
		return []byte("receipt-42"), nil
	})
	var final *idempotency.FinalError
	switch {
	case errors.Is(err, idempotency.ErrInProgress):
		// another consumer is charging it right now: retry later
	case errors.As(err, &final):
		// the stored answer, e.g. "card declined": the same every time
	case err != nil:
		log.Fatal(err)
	}
	_ = receipt
}
