package testkit

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPostgresURL is the PostgreSQL server tests use unless PG_URL is set:
// the local server with trust authentication and the database "test".
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Postgres returns a pool on a fresh schema of the test PostgreSQL server
// (PG_URL overrides [DefaultPostgresURL]). Every connection of the pool has
// the schema as its search_path, so unqualified table names land in it. The
// schema is dropped, with everything in it, when the test ends. An
// unreachable server fails the test.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := cmp.Or(os.Getenv("PG_URL"), DefaultPostgresURL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testkit: random schema name: %v", err)
	}
	schema := "lh_test_" + hex.EncodeToString(b[:])

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("testkit: PostgreSQL at %s unreachable (set PG_URL): %v", redactURL(url), err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("testkit: create schema: %v", err)
	}

	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("testkit: parse PG_URL: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testkit: pool: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("testkit: drop schema %s: %v", schema, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("testkit: drop schema %s: %v", schema, err)
		}
	})
	return pool
}

// redactURL hides a password in a connection URL before it is logged.
func redactURL(raw string) string {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil || cfg.Password == "" {
		return raw
	}
	return cfg.User + ":***@" + cfg.Host + "/" + cfg.Database
}
