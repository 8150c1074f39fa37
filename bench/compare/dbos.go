package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// dbosDatabase (re)creates the database DBOS keeps its system tables in, on
// the PostgreSQL at pgURL (a URL of any database there), and returns its URL.
func dbosDatabase(ctx context.Context, pgURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "", fmt.Errorf("postgres at %s: %w", pgURL, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	id := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return "", err
	}
	cfg, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name), nil
}

// dbosRun runs n workflows of one no-op step each, conc at a time, each
// with the job's key as its workflow ID (DBOS's idempotency), and measures
// between warm and n workflows finished.
func dbosRun(ctx context.Context, dbURL string, run, n, warm, conc int) (window, error) {
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		AppName:     "leasehold-compare",
		DatabaseURL: dbURL,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return window{}, err
	}
	step := func(context.Context) (string, error) { return "", nil }
	wf := func(c dbos.Context, key string) (string, error) { return dbos.RunAsStep(c, step) }
	dbos.RegisterWorkflow(dctx, wf)
	if err := dbos.Launch(dctx); err != nil {
		return window{}, err
	}
	defer func() { _ = dbos.Shutdown(dctx, 10*time.Second) }()

	var finished atomic.Int64
	errc := make(chan error, 1)
	go func() {
		var g errgroup.Group
		g.SetLimit(conc)
		for i := range n {
			g.Go(func() error {
				key := fmt.Sprintf("db%d-%d", run, i)
				h, err := dbos.RunWorkflow(dctx, wf, key, dbos.WithWorkflowID(key))
				if err != nil {
					return err
				}
				if _, err := h.GetResult(); err != nil {
					return err
				}
				finished.Add(1)
				return nil
			})
		}
		errc <- g.Wait()
	}()
	w, err := steady(ctx, nil, finished.Load, int64(warm), int64(n), 10*time.Minute)
	if err != nil {
		return w, err
	}
	return w, <-errc
}
