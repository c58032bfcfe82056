package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"time"

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

// A handler that calls an external system is safe to run twice only if the
// call carries the key: after a crash between the claim and the commit,
// the handler runs again once the claim is stale (Config.StaleAfter, by the
// database's clock), and the payment provider must see the same
// Idempotency-Key to charge once.
func ExampleStore_Do_externalCall() {
	ctx := context.Background()
	var db *sql.DB // a pgx or go-sql-driver/mysql pool
	store, err := idempotency.Open(ctx, db, idempotency.Config{StaleAfter: 5 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	chargeID, err := store.Do(ctx, "payment", "out-trade-no-42", func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
		attempt, _ := idempotency.AttemptOf(ctx)
		if attempt.TakenOver {
			// An earlier run crashed after its call may have reached the
			// provider: the same key below makes the provider answer with
			// that charge instead of making a second one.
			slog.Info("charging again after a takeover", "key", attempt.Key)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://payments.example/v1/charges", strings.NewReader(`{"amount":100}`))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Idempotency-Key", attempt.Key) // the key goes to the external system
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err // rolled back, the key freed: the next delivery retries with the same key
		}
		defer resp.Body.Close()
		id := resp.Header.Get("Charge-Id")
		// The local record of the charge commits with the key's record
		// (PostgreSQL placeholders; MySQL takes ?).
		if _, err := tx.ExecContext(ctx, "INSERT INTO charges (out_trade_no, charge_id) VALUES ($1, $2)", attempt.Key, id); err != nil {
			return nil, err
		}
		return []byte(id), nil
	})
	if err != nil && !errors.Is(err, idempotency.ErrInProgress) {
		log.Fatal(err)
	}
	_ = chargeID
}
