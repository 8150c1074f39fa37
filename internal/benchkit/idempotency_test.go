package benchkit_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestClaimComplete(t *testing.T) {
	c, prefix := testkit.SharedRedis(t)
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithTTL(2*time.Second),
		lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	s, err := idempotency.New(t.Context(), c, m, idempotency.WithPrefix(prefix))
	if err != nil {
		t.Fatalf("idempotency.New: %v", err)
	}
	ctx := t.Context()

	// One request without a fingerprint (it gets its key's), one with.
	other, err := s.Fingerprint([]byte("other payload"))
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := uuid.NewString(), uuid.NewString()
	reqs := []idempotency.Request{{Key: k1}, {Key: k2, Fingerprint: other}}
	if err := benchkit.ClaimComplete(ctx, s, reqs); err != nil {
		t.Fatalf("ClaimComplete: %v", err)
	}
	own, err := s.Fingerprint([]byte(k1))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		key string
		fp  idempotency.Fingerprint
	}{{k1, own}, {k2, other}} {
		info, err := s.Lookup(ctx, w.key)
		if err != nil {
			t.Fatalf("Lookup(%s): %v", w.key, err)
		}
		if info.State != idempotency.Completed || info.Fingerprint != w.fp || info.Leased {
			t.Fatalf("Lookup(%s) = state %v, fingerprint %x, leased %v; want Completed, %x, not leased",
				w.key, info.State, info.Fingerprint, info.Leased, w.fp)
		}
	}

	// Keys already completed are not acquired: an error naming the outcome.
	err = benchkit.ClaimComplete(ctx, s, []idempotency.Request{{Key: k1}})
	if err == nil || !strings.Contains(err.Error(), idempotency.Duplicate.String()) {
		t.Fatalf("ClaimComplete of a completed key = %v, want an error naming %v", err, idempotency.Duplicate)
	}
}
