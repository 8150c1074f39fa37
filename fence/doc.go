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
// with a newer one. Equal fences are accepted: one owner may write a resource
// many times.
//
// Any SQL write works: put Apply first in the transaction (before the write,
// so that the row lock orders concurrent writers) and choose resource names
// that cover the rows the fence protects. Fences from one lease key are
// comparable; fences from different lease keys are not, so a resource should
// be written under one lease key (typically the job's idempotency key).
//
// [Write] wraps the pattern above: begin, Apply, your statements, commit.
//
// [Migrate] creates the fence table; run it once at deployment or start-up.
package fence
