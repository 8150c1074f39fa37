package leasehold

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestKeyLimitsAgree: the idempotency store built with its defaults takes
// exactly the keys the worker and Enqueue take: MaxKeyLen bytes, not one
// more. A key one side takes and the other refuses would be dead-lettered
// by one worker and run by another process sharing the records.
func TestKeyLimitsAgree(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	ctx := t.Context()
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix))
	must(t, err)
	must(t, m.Start(ctx))
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	s, err := idempotency.New(ctx, rdb, m, idempotency.WithPrefix(prefix))
	must(t, err)

	at, over := strings.Repeat("k", MaxKeyLen), strings.Repeat("k", MaxKeyLen+1)
	if err := ValidateKey(at); err != nil {
		t.Errorf("ValidateKey refuses a key of MaxKeyLen (%d) bytes: %v", MaxKeyLen, err)
	}
	if err := ValidateKey(over); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("ValidateKey of %d bytes: %v, want ErrInvalidKey", MaxKeyLen+1, err)
	}
	if _, err := s.Claim(ctx, at, idempotency.Fingerprint{}); err != nil {
		t.Errorf("the store refuses a key of MaxKeyLen (%d) bytes: %v", MaxKeyLen, err)
	}
	if _, err := s.Claim(ctx, over, idempotency.Fingerprint{}); !errors.Is(err, idempotency.ErrInvalidKey) {
		t.Errorf("the store's claim of a %d-byte key: %v, want idempotency.ErrInvalidKey", MaxKeyLen+1, err)
	}
}
