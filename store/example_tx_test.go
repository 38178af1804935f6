package store_test

import (
	"context"
	"log"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/jackc/pgx/v5"
)

// A job stored in the application's own transaction exists exactly when
// the application's data does: here an invoice and the job that mails it.
// This example needs Fairway's database: the tests compile it only.
func ExampleInsertTx() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://app@db.internal/fairway")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op once committed
	if _, err := tx.Exec(ctx, "INSERT INTO invoice (id, customer) VALUES ($1, $2)", 1042, "acme"); err != nil {
		log.Fatal(err)
	}
	ids, err := store.InsertTx(ctx, tx, store.TxOptions{}, fairway.Submission{
		Group: "acme", Task: "mail-invoice", Args: []byte(`{"invoice": 1042}`),
		ID: "invoice-1042", // idempotent: storing it twice makes one job
	})
	if err != nil {
		log.Fatal(err) // invalid, or its tracker held: roll back
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	log.Println("stored job", ids[0])
}
