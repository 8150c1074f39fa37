// Package fence guards downstream writes with lease fencing tokens, so that a
// process that lost its lease (a "zombie": paused by GC, a stopped VM, a
// partition) cannot overwrite the work of the owner that replaced it.
//
// Redis can only fence what Redis stores. A job that writes to PostgreSQL
// passes its fence (job.Fence(), or lease.Lease.Fence) to [Apply] inside the
// same transaction as its write:
//
//	tx, err := pool.Begin(ctx)
//	if err != nil { return err }
//	defer tx.Rollback(ctx)
//	if err := fence.Apply(ctx, tx, "account:42", job.Fence()); err != nil {
//		return err // fence.ErrStaleFence: a newer owner has written; roll back
//	}
//	if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, 42); err != nil {
//		return err
//	}
//	return tx.Commit(ctx)
//
// Apply is one conditional upsert on the fence table: it records the fence for
// the resource when it is greater than or equal to the newest fence seen for
// that resource, and takes the row lock, so that every later writer of the
// resource waits for this transaction to end and then compares its fence
// with the one this transaction committed. A writer with an older fence gets
// [ErrStaleFence] and must roll back; because the check and the write commit
// or roll back together, no write with an older fence lands after a write
// with a newer one.
//
// What the guard promises, exactly:
//
//   - With Apply alone: writes to a resource land in fence order. Once a
//     write with fence F has committed, no write with a fence below F lands.
//     But until the new owner's first write commits, the stored fence is
//     still the old owner's, so a zombie (the old owner, still running) can
//     go on writing the resource: its writes land before the new owner's
//     first, and the new owner must expect to find them.
//   - With [Take] at the start of the run: the new owner records its fence
//     for the resource before its first write (Take commits on its own when
//     given a pool), and from that moment every write with an older fence is
//     refused, whatever the older owner wrote before. A zombie's write that
//     committed before the Take stays, as a write before a lease expired
//     does. Take the resources a run will write as its first step; a Take
//     refused with ErrStaleFence means a newer owner exists: stop.
//
// ErrStaleFence matches leasehold.ErrLeaseLost (lease.ErrLost) with
// errors.Is: a handler that returns it, as it is or wrapped, is settled by the
// worker as a lost lease (its saga steps compensated, not retried as a
// failure).
//
// Equal fences pass, with or without Take: one owner may write a resource
// many times. Neither stops a write to a resource the guard was not asked
// about: put Apply first in every transaction that writes (before the write,
// so that the row lock orders concurrent writers) and choose resource names
// that cover the rows the fence protects. Fences from one lease key are
// comparable; fences from different lease keys are not, so a resource should
// be written under one lease key (typically the job's idempotency key).
//
// The functions ending in Std ([ApplyStd], [TakeStd], [WriteStd],
// [MigrateStd], [CurrentStd]) are the same guard for database/sql, with any
// PostgreSQL driver.
//
// [Write] wraps the pattern above: begin, Apply, your statements, commit.
//
// [Migrate] creates the fence table; run it once at deployment or start-up.
package fence
