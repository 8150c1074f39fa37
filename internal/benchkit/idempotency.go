package benchkit

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/idempotency"
)

// ClaimComplete claims reqs in one ClaimBatch and completes them all with an
// empty result in one CompleteBatch, as a worker does for a poll batch of
// no-op jobs. A request with a zero Fingerprint first gets the Store's
// fingerprint of its key, as if the key were the payload. It returns an error
// if a claim is not Acquired (the keys must be fresh) or a completion fails.
func ClaimComplete(ctx context.Context, s *idempotency.Store, reqs []idempotency.Request) error {
	for i := range reqs {
		if reqs[i].Fingerprint != (idempotency.Fingerprint{}) {
			continue
		}
		f, err := s.Fingerprint([]byte(reqs[i].Key))
		if err != nil {
			return err
		}
		reqs[i].Fingerprint = f
	}
	claims := s.ClaimBatch(ctx, reqs)
	comps := make([]idempotency.Completion, 0, len(claims))
	for _, c := range claims {
		if c.Err != nil {
			return fmt.Errorf("claim %s: %v: %w", c.Key, c.Outcome, c.Err)
		}
		if c.Outcome != idempotency.Acquired {
			return fmt.Errorf("claim %s: %v, want %v", c.Key, c.Outcome, idempotency.Acquired)
		}
		comps = append(comps, idempotency.Completion{Claim: c})
	}
	for _, err := range s.CompleteBatch(ctx, comps) {
		if err != nil {
			return err
		}
	}
	return nil
}
