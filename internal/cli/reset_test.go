package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
)

// TestResetCommand: `worker reset KEY` forgets a terminal failure (the key
// then claims as a first attempt, under a higher fence), refuses a key whose
// lease is live, and with --force ends that lease (its holder loses it).
func TestResetCommand(t *testing.T) {
	t.Parallel()
	url, prefix, rdb := sharedRedisURL(t)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	ctx := context.Background()
	s := workerStore(t, rdb, prefix)
	claim := func(k, payload string, want idempotency.Outcome) *idempotency.Claim {
		t.Helper()
		fpr, _ := idempotency.PayloadFingerprint([]byte(payload))
		c, err := s.Claim(ctx, k, fpr)
		if c.Outcome != want {
			t.Fatalf("claim %s: %v (%v), want %v", k, c.Outcome, err, want)
		}
		return c
	}

	failed := claim("pay-1", "bad", idempotency.Acquired)
	if err := s.Fail(ctx, failed, idempotency.Terminal, errors.New("declined")); err != nil {
		t.Fatal(err)
	}
	claim("pay-1", "fixed", idempotency.Mismatch)
	r := run(ctx, t, env, "reset", "pay-1")
	if r.code != 0 || !strings.Contains(r.stdout, "reset pay-1: it was FAILED (fence "+fmt.Sprint(failed.Fence)+")") {
		t.Fatalf("reset: %+v", r)
	}
	if !strings.Contains(r.stderr, "idempotency key reset by operator") || !strings.Contains(r.stderr, "key=pay-1") {
		t.Errorf("reset not logged: %q", r.stderr)
	}
	if again := claim("pay-1", "fixed", idempotency.Acquired); again.Fence <= failed.Fence || again.Attempt != 1 {
		t.Fatalf("after reset: fence %d attempt %d, want above %d and 1", again.Fence, again.Attempt, failed.Fence)
	}

	held := claim("pay-2", "p", idempotency.Acquired)
	wantFailure(t, run(ctx, t, env, "reset", "pay-2"), 1, "pass --force")
	claim("pay-2", "p", idempotency.Held)
	r = run(ctx, t, env, "reset", "--force", "pay-2")
	if r.code != 0 || !strings.Contains(r.stdout, "its lease was ended") {
		t.Fatalf("reset --force: %+v", r)
	}
	select {
	case <-held.Lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder kept its lease after reset --force")
	}
	if err := s.Complete(ctx, held, []byte("late")); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("the holder's commit after reset --force = %v, want ErrLeaseLost", err)
	}
	if r := run(ctx, t, env, "reset", "pay-never"); r.code != 0 || !strings.Contains(r.stdout, "no record") {
		t.Fatalf("reset of an unknown key: %+v", r)
	}
	wantFailure(t, run(ctx, t, env, "reset"), 2, "want exactly one argument")
}
