// Package demo holds the job logic of the demo and of the chaos suite.
//
// demo.transfer ([Transfer]) does the two kinds of effect a long job has:
// an unfenced call to an external payment provider (internal/paystub), run
// as a saga step whose compensation refunds the charge, and a fenced
// PostgreSQL write (package fence) that moves the amount between two
// accounts. Counting the provider's ledger and the accounts from outside
// shows whether the effects happened exactly once.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/paystub"
)

// TransferType is the job type of the demo transfer.
const TransferType = "demo.transfer"

// RefundHandler is the name of the transfer's compensation handler.
const RefundHandler = "demo.transfer.refund"

// Job is what a transfer needs from the job running it: its fence and saga
// steps. *leasehold.Job and *compensation.Journal provide both.
type Job interface {
	Fence() uint64
	Step(ctx context.Context, name string, do func(context.Context) error, compensateName string, compensateArgs any) error
}

// DB is what a transfer needs from PostgreSQL: *pgxpool.Pool and *pgx.Conn
// provide it.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// TransferArgs is the payload of a demo.transfer job.
type TransferArgs struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
	// HoldMS, when above 0, stalls the transfer for that many milliseconds
	// between its charge and its fenced write (0..[MaxHoldMS]); the Run
	// method documents how. Omitted from the payload when 0. `worker run`
	// holds a job's first attempt only: the stall is the first owner's.
	HoldMS int64 `json:"hold_ms,omitempty"`
}

// MaxHoldMS is the longest hold a transfer accepts, in milliseconds (one
// minute): long enough to outlast any lease TTL a demo or chaos run uses,
// short enough that a held job cannot hold a worker's shutdown for long.
const MaxHoldMS = 60_000

// ChargeTimeout bounds the provider call of the charge step, which is not
// abandoned when the job's context is cancelled (see the Run method).
const ChargeTimeout = 10 * time.Second

// HeldWriteTimeout bounds the fenced write of a held transfer, which runs
// detached from the job's cancellation (see the Run method).
const HeldWriteTimeout = 10 * time.Second

// MaxAccountLen is the longest account name a transfer accepts, in bytes.
const MaxAccountLen = 64

// MaxAmount is the largest amount one transfer moves, so that balances and
// sums over many transfers stay far inside PostgreSQL's bigint.
const MaxAmount = 1_000_000_000_000

// ErrInvalidTransfer is matched by every error ParseTransfer returns: the
// payload can never succeed, so the job is a permanent failure.
var ErrInvalidTransfer = errors.New("demo: invalid transfer payload")

// ParseTransfer decodes and checks a demo.transfer payload (valid UTF-8
// JSON): two distinct account names (see [ValidateAccount]), an amount in
// 1..[MaxAmount] and a hold_ms in 0..[MaxHoldMS].
// Its errors match [ErrInvalidTransfer]; callers treat them as permanent.
func ParseTransfer(payload []byte) (TransferArgs, error) {
	var a TransferArgs
	if !utf8.Valid(payload) {
		// encoding/json would turn the bad bytes into U+FFFD: a different name.
		return a, fmt.Errorf("%w: not valid UTF-8", ErrInvalidTransfer)
	}
	if err := json.Unmarshal(payload, &a); err != nil {
		return a, fmt.Errorf("%w: %w", ErrInvalidTransfer, err)
	}
	for _, acc := range []struct{ field, name string }{{"from", a.From}, {"to", a.To}} {
		if err := ValidateAccount(acc.name); err != nil {
			return a, fmt.Errorf("%w: %s: %w", ErrInvalidTransfer, acc.field, err)
		}
	}
	if a.From == a.To {
		return a, fmt.Errorf("%w: from and to are the same account %q", ErrInvalidTransfer, a.From)
	}
	if a.Amount <= 0 || a.Amount > MaxAmount {
		return a, fmt.Errorf("%w: amount %d outside 1..%d", ErrInvalidTransfer, a.Amount, int64(MaxAmount))
	}
	if a.HoldMS < 0 || a.HoldMS > MaxHoldMS {
		return a, fmt.Errorf("%w: hold_ms %d outside 0..%d", ErrInvalidTransfer, a.HoldMS, MaxHoldMS)
	}
	return a, nil
}

// ValidateAccount reports whether name can be an account: not empty, at most
// [MaxAccountLen] bytes, valid UTF-8, and only printable characters
// (unicode.IsPrint: no NUL, no control or format characters, no line breaks).
func ValidateAccount(name string) error {
	switch {
	case name == "":
		return errors.New("empty account name")
	case len(name) > MaxAccountLen:
		return fmt.Errorf("account name of %d bytes, more than %d", len(name), MaxAccountLen)
	case !utf8.ValidString(name):
		return errors.New("account name is not valid UTF-8")
	}
	for i, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("account name has the unprintable character %q at byte %d", r, i)
		}
	}
	return nil
}

// RefundArgs are the arguments of [RefundHandler].
type RefundArgs struct {
	ChargeID string `json:"charge_id"`
}

// ChargeID is the provider idempotency key of one attempt's charge: each
// owner of the key charges under its own fence, so a zombie's charge and
// the new owner's are distinct and the zombie's can be refunded alone.
func ChargeID(key string, fence uint64) string { return key + "/" + strconv.FormatUint(fence, 10) }

// Resource is the fence resource of the transfer with key: every attempt
// at it writes under that one resource.
func Resource(key string) string { return "demo.transfer:" + key }

// Transferer runs demo transfers against a database and a payment provider.
type Transferer struct {
	DB  DB
	Pay *paystub.Client
	// OnWrite, when not nil, is told of every fenced write just before it
	// begins (its key and fence), and the function it returns when the
	// write has ended, with its error (nil: applied; one wrapping
	// fence.ErrStaleFence: refused by the guard).
	OnWrite func(key string, fence uint64) (ended func(err error))
}

// RegisterCompensations registers the transfer's refund handler. It refunds
// through the provider, which refunds a charge once however often it is
// asked; a charge that never happened (an in-doubt step) needs no refund.
func RegisterCompensations(reg *compensation.Registry, pay *paystub.Client) error {
	return compensation.Register(reg, RefundHandler, func(ctx context.Context, a RefundArgs) error {
		err := pay.Refund(ctx, a.ChargeID)
		if errors.Is(err, paystub.ErrNoCharge) {
			return nil
		}
		return err
	})
}

// Migrate creates the fence table and the demo tables.
func Migrate(ctx context.Context, db DB) error {
	if err := fence.Migrate(ctx, db); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS demo_accounts (
		id      text   PRIMARY KEY,
		balance bigint NOT NULL
	);
	CREATE TABLE IF NOT EXISTS demo_transfers (
		key     text   PRIMARY KEY,
		fence   bigint NOT NULL,
		from_id text   NOT NULL,
		to_id   text   NOT NULL,
		amount  bigint NOT NULL
	)`)
	if err != nil {
		return fmt.Errorf("demo: migrate: %w", err)
	}
	return nil
}

// OpenAccount creates (or resets) an account with a balance.
func OpenAccount(ctx context.Context, db DB, id string, balance int64) error {
	_, err := db.Exec(ctx, `INSERT INTO demo_accounts (id, balance) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance`, id, balance)
	return err
}

// Run performs the transfer with idempotency key key as job:
//
//  1. step "charge": the provider charges a.From a.Amount under
//     [ChargeID](key, fence); compensation: [RefundHandler]. The call is
//     not abandoned when ctx is cancelled once it started (bounded by
//     [ChargeTimeout]), so that its outcome is always known to the journal.
//  2. in one PostgreSQL transaction: [fence.Apply] on [Resource](key), then
//     the transfer row (once per key) and the two balance updates.
//
// A zombie reaching step 2 after a newer owner wrote gets an error wrapping
// fence.ErrStaleFence and writes nothing; its caller compensates the charge.
//
// With a.HoldMS > 0 the transfer stalls between the two steps, the way a
// process does that is stopped by a long GC pause, a frozen VM or SIGSTOP:
// it does not know that its lease may expire meanwhile. So the hold is a
// plain time.Sleep that ignores ctx's cancellation (the worker cancels ctx
// when it finds the lease lost), and the write after it runs detached from
// that cancellation, bounded by [HeldWriteTimeout]. A held transfer whose
// lease was taken over therefore really attempts its write with the old
// fence, and the fence guard is what refuses it. Without a hold the write
// runs under ctx, as a well-behaved handler's should.
func (t *Transferer) Run(ctx context.Context, job Job, key string, a TransferArgs) error {
	f := job.Fence()
	charge := ChargeID(key, f)
	if err := job.Step(ctx, "charge", func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err // the lease is already lost: do not start the charge
		}
		// A charge, once sent, is seen through to its answer even if ctx
		// is cancelled meanwhile. An abandoned call may still be applied
		// by the provider after the step was compensated as in doubt (a
		// new owner took over and refunded a charge that did not exist
		// yet); only an answered call lets Step record it, find it late
		// (compensation.ErrLateEffect) and have it refunded again.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ChargeTimeout)
		defer cancel()
		return t.Pay.Charge(cctx, charge, a.From, a.Amount)
	}, RefundHandler, RefundArgs{ChargeID: charge}); err != nil {
		return fmt.Errorf("demo: transfer %s: charge: %w", key, err)
	}
	if a.HoldMS > 0 {
		time.Sleep(time.Duration(min(a.HoldMS, MaxHoldMS)) * time.Millisecond)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), HeldWriteTimeout)
		defer cancel()
	}
	ended := func(error) {}
	if t.OnWrite != nil {
		ended = t.OnWrite(key, f)
	}
	err := t.write(ctx, key, f, a)
	ended(err)
	if err != nil {
		return fmt.Errorf("demo: transfer %s: %w", key, err)
	}
	return nil
}

func (t *Transferer) write(ctx context.Context, key string, f uint64, a TransferArgs) error {
	tx, err := t.DB.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, Rollback is a no-op
	if err := fence.Apply(ctx, tx, Resource(key), f); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO demo_transfers (key, fence, from_id, to_id, amount)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING`, key, int64(f), a.From, a.To, a.Amount) //nolint:gosec // fence.Apply refused a fence beyond int64
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 { // a retry after a crash past commit moves nothing twice
		for _, u := range []struct {
			id    string
			delta int64
		}{{a.From, -a.Amount}, {a.To, a.Amount}} {
			tag, err := tx.Exec(ctx, `UPDATE demo_accounts SET balance = balance + $2 WHERE id = $1`, u.id, u.delta)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("no account %q", u.id)
			}
		}
	}
	return tx.Commit(ctx)
}
