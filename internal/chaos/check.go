package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/paystub"
)

// InitialBalance is the balance every chaos account opens with.
const InitialBalance = 1_000_000

// Job is one distinct demo.transfer job of a run. Each job moves Amount
// from its own account FromAccount(Key) to its own account ToAccount(Key),
// so that the two balances show how many times its fenced write applied.
type Job struct {
	Key    string
	Amount int64
}

// FromAccount is the account a job's transfer debits.
func FromAccount(key string) string { return "a:" + key }

// ToAccount is the account a job's transfer credits.
func ToAccount(key string) string { return "b:" + key }

// Evidence is what the checker reads: PostgreSQL (through a pool whose
// search_path is the run's schema) and the payment stub's ledger.
type Evidence struct {
	DB     *pgxpool.Pool
	Ledger paystub.Ledger
	// Cancelled are the keys an operator cancelled (their record FAILED as
	// cancelled, read from Redis after the drain): their effect must be
	// absent or applied once, their charges refunded.
	Cancelled map[string]bool
}

// Check derives the correctness figures of a run from the outside evidence
// only: for every job, how many times its fenced transfer moved money
// (from the two account balances and the demo_transfers row), and how many
// of its charges at the payment stub were not refunded. It fills
// JobsEnqueued, JobsCompleted, JobsLost, FencedEffectsDuplicated,
// UnfencedNetNotOne, CompensationsRun and, for the cancelled keys,
// JobsCancelled, CancelledEffectAbsent, CancelledEffectApplied and
// CancelledNotCompensated.
func Check(ctx context.Context, ev Evidence, jobs []Job) (Figures, error) {
	var f Figures
	f.JobsEnqueued = len(jobs)
	balances, transfers, err := readTransfers(ctx, ev.DB)
	if err != nil {
		return f, err
	}

	// Charges not refunded, per job key. A charge id is "<key>/<fence>".
	net := map[string]int{}
	for _, c := range ev.Ledger.Charges {
		i := strings.LastIndexByte(c.ID, '/')
		if i < 0 {
			continue
		}
		if !c.Refunded {
			net[c.ID[:i]]++
		}
	}
	f.CompensationsRun = ev.Ledger.RefundsApplied

	for _, j := range jobs {
		from, okFrom := balances[FromAccount(j.Key)]
		to, okTo := balances[ToAccount(j.Key)]
		if !okFrom || !okTo {
			return f, fmt.Errorf("chaos: accounts of job %q missing: the run did not open them", j.Key)
		}
		f.account(j, InitialBalance-from, to-InitialBalance, transfers[j.Key], net[j.Key], ev.Cancelled[j.Key])
	}
	return f, nil
}

// readTransfers reads the accounts' balances and the keys of the transfer
// rows from one snapshot: read apart, a transfer committed between the two
// reads (a drain that timed out leaves jobs running) would look half
// applied.
func readTransfers(ctx context.Context, db *pgxpool.Pool) (map[string]int64, map[string]bool, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: read accounts: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	balances := map[string]int64{}
	rows, err := tx.Query(ctx, `SELECT id, balance FROM demo_accounts`)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: read accounts: %w", err)
	}
	for rows.Next() {
		var id string
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			return nil, nil, fmt.Errorf("chaos: read accounts: %w", err)
		}
		balances[id] = b
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("chaos: read accounts: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT key FROM demo_transfers`)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: read transfers: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: read transfers: %w", err)
	}
	transfers := make(map[string]bool, len(keys))
	for _, k := range keys {
		transfers[k] = true
	}
	return balances, transfers, nil
}

// account counts job j in f: debited and credited are what moved between
// its accounts, written whether its transfer row exists, net its charges
// not refunded, cancelled whether an operator cancelled it.
func (f *Figures) account(j Job, debited, credited int64, written bool, net int, cancelled bool) {
	switch {
	case debited == 0 && credited == 0 && !written:
		if cancelled {
			f.CancelledEffectAbsent++
		} else {
			f.JobsLost++
		}
	case debited == j.Amount && credited == j.Amount && written:
		if cancelled {
			f.CancelledEffectApplied++
		} else {
			f.JobsCompleted++
		}
	default:
		// Applied more than once, or half applied: either way the
		// fenced effect is not exactly one.
		f.FencedEffectsDuplicated++
	}
	switch {
	case cancelled:
		f.JobsCancelled++
		if net != 0 { // its saga refunds every charge
			f.CancelledNotCompensated++
		}
	case net != 1:
		f.UnfencedNetNotOne++
	}
}

// staleLine matches the fence guard's refusal as a worker logs it:
// `fence: stale fence F for "RESOURCE"`.
var staleLine = regexp.MustCompile(`fence: stale fence ([0-9]+) for \\?"([^"\\]+)\\?"`)

// CountStaleFences counts the distinct (resource, fence) pairs that the
// PostgreSQL fence guard refused, as found in the worker logs. A refused
// write leaves no trace in PostgreSQL (its transaction rolls back), so the
// workers' logs are the only record of it; the figure is informational and
// no invariant depends on it.
func CountStaleFences(logs []string) (int, error) {
	seen := map[string]bool{}
	for _, path := range logs {
		fh, err := os.Open(path) //nolint:gosec // the run's own log files
		if err != nil {
			return 0, fmt.Errorf("chaos: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			for _, m := range staleLine.FindAllStringSubmatch(sc.Text(), -1) {
				if _, err := strconv.ParseUint(m[1], 10, 64); err == nil {
					seen[m[2]+"\x00"+m[1]] = true
				}
			}
		}
		err = sc.Err()
		_ = fh.Close()
		if err != nil {
			return 0, fmt.Errorf("chaos: read %s: %w", path, err)
		}
	}
	return len(seen), nil
}
