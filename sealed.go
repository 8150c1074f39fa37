package leasehold

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
)

// commitLanded is the compensation runner's commit check
// (compensation.WithCommitted): it tells the recovery sweep whether the
// fenced commit of a sealed journal landed, when its owner died between the
// commit and Journal.Close. A job's journal is named after its lease,
// "{i:N}:K" for idempotency key K (idempotency.Store.LeaseName), and its
// fence F is the attempt's.
//
// The commit of F landed iff K's record is COMPLETED with fence F. Complete
// and Fail are fenced transitions out of PROCESSING(F) that end F's lease, so
// at most one of them lands, and a COMPLETED record is final while it is
// retained (a claim of it is a duplicate and issues no new fence). So FAILED
// or released with fence F (the commit was rejected, the failure recorded
// instead), PROCESSING or any state under another fence (a newer attempt took
// the key over, which COMPLETED(F) would have prevented), and no record at
// all, each prove the commit missing: compensate. That holds only while
// COMPLETED(F) would still be retained. The commit came after F's claim and a
// fence is the Redis time of its claim in microseconds (lease package,
// "Fences"), so the proof stands while Redis time is before F plus the
// retention, less the lease TTL as a margin for clocks that disagree across a
// failover. Past that the record may have expired (a journal sealed before
// an outage longer than the retention): the answer is
// compensation.ErrCommitUnknown and the journal stays sealed until its own
// retention ends, as does a journal named after no lease of this store.
// Redis errors are returned: the sweep leaves the journal for its next pass.
func (rs *redisStore) commitLanded(ctx context.Context, ref compensation.Ref) (bool, error) {
	_, k, ok := strings.Cut(ref.Name, "}:")
	if !ok || rs.s.LeaseName(k) != ref.Name {
		return false, fmt.Errorf("%w: %s names no job lease", compensation.ErrCommitUnknown, ref)
	}
	landed, state, err := rs.completedWith(ctx, k, ref.Fence)
	if err != nil || landed {
		return landed, err
	}
	now, err := rs.rdb.Time(ctx).Result()
	if err != nil {
		return false, mapStoreErr(fmt.Errorf("leasehold: TIME: %w", err))
	}
	age, horizon := now.Sub(time.UnixMicro(int64(ref.Fence))), rs.s.Retention()-rs.m.TTL() //nolint:gosec // a fence is a microsecond Unix time, far below 2^63
	if age < horizon {
		return false, nil
	}
	return false, fmt.Errorf("%w: %s was claimed %s ago, its record (%s) may have expired (retention %s)",
		compensation.ErrCommitUnknown, ref, age.Round(time.Second), state, rs.s.Retention())
}

// completedWith reads key k's record: landed is true when it is COMPLETED
// under fence; state is the record's state either way.
func (rs *redisStore) completedWith(ctx context.Context, k string, fence uint64) (landed bool, state idempotency.State, err error) {
	info, err := rs.s.Lookup(ctx, k)
	if err != nil {
		return false, 0, mapStoreErr(err)
	}
	return info.State == idempotency.Completed && info.Fence == fence, info.State, nil
}
