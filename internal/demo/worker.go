package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/paystub"
)

// ErrTransferConfig is returned by [OpenTransfer] for URLs it cannot use:
// the command line reports it as a usage error.
var ErrTransferConfig = errors.New("demo: bad demo.transfer configuration")

// TransferSetup is what demo.transfer needs in cmd/worker: a PostgreSQL pool
// and the payment stub (its refund handler is registered by
// [RegisterCompensations]).
type TransferSetup struct {
	pool *pgxpool.Pool
	pay  *paystub.Client
}

// OpenTransfer connects to PostgreSQL (migrating the demo tables) and builds
// the payment stub client. Both URLs are required for demo.transfer; with
// neither it returns nil.
func OpenTransfer(ctx context.Context, pgURL, payURL string) (*TransferSetup, error) {
	switch {
	case pgURL == "" && payURL == "":
		return nil, nil
	case pgURL == "" || payURL == "":
		return nil, fmt.Errorf("%w: demo.transfer needs both --pg and --payment-stub", ErrTransferConfig)
	}
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres URL: %w", ErrTransferConfig, errors.Unwrap(err))
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
	if err := Migrate(pctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &TransferSetup{pool: pool, pay: paystub.NewClient(payURL, nil)}, nil
}

// Open is [OpenTransfer] in the shape of the worker command line's parts
// (cli.DevParts.OpenTransfer): demo.transfer's Register and Close, or nil
// ones when neither URL is set.
func Open(ctx context.Context, pgURL, payURL string) (func(*leasehold.Worker, *slog.Logger) error, func(), error) {
	t, err := OpenTransfer(ctx, pgURL, payURL)
	if err != nil || t == nil {
		return nil, nil, err
	}
	return t.Register, t.Close, nil
}

// RegisterRefunds registers demo.transfer's refund compensation on reg,
// calling the payment stub at payURL.
func RegisterRefunds(reg *compensation.Registry, payURL string) error {
	return RegisterCompensations(reg, paystub.NewClient(payURL, nil))
}

// Close closes the PostgreSQL pool.
func (t *TransferSetup) Close() {
	if t != nil {
		t.pool.Close()
	}
}

// Register adds demo.transfer to w. Only a job's first attempt holds (see
// [TransferArgs].HoldMS). A write the fence guard refuses is
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
func (t *TransferSetup) Register(w *leasehold.Worker, log *slog.Logger) error {
	tr := &Transferer{DB: t.pool, Pay: t.pay, //nolint:misspell // the type is named so in package demo
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
	return w.Register(TransferType, func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
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
		a, err := ParseTransfer(job.Payload)
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
		return []byte(`{"charged":"` + ChargeID(job.Key, job.Fence()) + `"}`), nil
	}, leasehold.WithMaxAttempts(10), leasehold.WithBackoff(100*time.Millisecond, 5*time.Second))
}
