package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/paystub"
)

// transferSetup is what demo.transfer needs: a PostgreSQL pool and the
// payment stub (its refund handler is registered by [DemoOptions]).
type transferSetup struct {
	pool *pgxpool.Pool
	pay  *paystub.Client
}

// openTransfer connects to PostgreSQL (migrating the demo tables) and builds
// the payment stub client. Both URLs are required for demo.transfer; with
// neither it returns nil.
func openTransfer(ctx context.Context, pgURL, payURL string) (*transferSetup, error) {
	switch {
	case pgURL == "" && payURL == "":
		return nil, nil
	case pgURL == "" || payURL == "":
		return nil, usagef("demo.transfer needs both --pg and --payment-stub")
	}
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, usagef("postgres URL: %v", errors.Unwrap(err))
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(pctx, cfg)
	if err == nil {
		err = pool.Ping(pctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("postgres at %s:%d does not answer: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if err := demo.Migrate(pctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &transferSetup{pool: pool, pay: paystub.NewClient(payURL, nil)}, nil
}

func (t *transferSetup) close() {
	if t != nil {
		t.pool.Close()
	}
}

// register adds demo.transfer to w. Only a job's first attempt holds (see
// demo.TransferArgs.HoldMS). A write the fence guard refuses is
// logged here, with the guard's error: when the job's lease was lost first,
// the worker reports the loss, not the handler's error, and the refusal
// would otherwise leave no trace (its transaction rolls back).
//
// Each fenced write is logged at debug level before it begins ("fenced
// write begins") and when it ends ("fenced write", with its begin and end in
// Unix microseconds and its outcome), and so is a job's
// cancellation ("transfer cancelled", with its time and cause): the chaos
// harness reads them to check the writes against its model of the record
// and to time a lost lease's handler against its takeover; a handler that
// returns before its cancellation logs "transfer returned" instead.
func (t *transferSetup) register(w *leasehold.Worker, log *slog.Logger) error {
	tr := &demo.Transferer{DB: t.pool, Pay: t.pay, //nolint:misspell // the type is named so in package demo
		OnWrite: func(key string, f uint64) func(error) {
			// Logged before the write, so that a write cut short by a
			// kill still shows (its outcome unknown).
			began := time.Now().UnixMicro()
			log.Debug("fenced write begins", slog.String("key", key), slog.Uint64("fence", f), slog.Int64("began_us", began))
			return func(err error) {
				outcome := "applied"
				switch {
				case errors.Is(err, fence.ErrStaleFence):
					outcome = "refused"
				case err != nil:
					outcome = "error"
				}
				log.Debug("fenced write", slog.String("key", key), slog.Uint64("fence", f), slog.Int64("began_us", began),
					slog.Int64("ended_us", time.Now().UnixMicro()), slog.String("outcome", outcome))
			}
		}}
	return w.Register(demo.TransferType, func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		stop := context.AfterFunc(ctx, func() {
			log.Debug("transfer cancelled", slog.String("key", job.Key), slog.Uint64("fence", job.Fence()),
				slog.Int64("at_us", time.Now().UnixMicro()), slog.Any("cause", context.Cause(ctx)))
		})
		defer func() {
			if stop() {
				log.Debug("transfer returned", slog.String("key", job.Key), slog.Uint64("fence", job.Fence()),
					slog.Int64("at_us", time.Now().UnixMicro()))
			}
		}()
		a, err := demo.ParseTransfer(job.Payload)
		if err != nil {
			return nil, leasehold.Permanent(err)
		}
		if job.Attempt > 1 {
			// The hold stands for a stall of the process running the
			// first attempt; the worker that takes the job over is not
			// stalled, and writes before the stalled one wakes up.
			a.HoldMS = 0
		}
		if err := tr.Run(ctx, job, job.Key, a); err != nil {
			if errors.Is(err, fence.ErrStaleFence) {
				log.Warn("fenced write refused: a newer owner wrote first", slog.String("key", job.Key),
					slog.Uint64("fence", job.Fence()), slog.Any("err", err))
			}
			return nil, err
		}
		return []byte(`{"charged":"` + demo.ChargeID(job.Key, job.Fence()) + `"}`), nil
	}, leasehold.WithMaxAttempts(10), leasehold.WithBackoff(100*time.Millisecond, 5*time.Second))
}
