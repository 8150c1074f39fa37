package inspect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestExpireAsLeastPrivilegeUser: Expire works as the least-privilege ACL
// user of docs/security.md (testkit.ProjectACLRules plus +info), which has
// no @transaction commands (WATCH, MULTI, EXEC): the operator's `expire`
// must not need them.
func TestExpireAsLeastPrivilegeUser(t *testing.T) {
	t.Parallel()
	const prefix, password = "lpx:", "lpx-s3cret"
	srv := testkit.StartRedis(t, testkit.WithACLUser("lpx", password, append(testkit.ProjectACLRules(prefix), "+info")...))
	o := srv.Options()
	o.Username, o.Password = "lpx", password
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithTTL(2*time.Second))
	must(t, err)
	must(t, m.Start(ctx))
	in := inspect.New(c, inspect.WithPrefix(prefix))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = in.Close(ctx)
		_ = m.Shutdown(ctx)
	})
	s, err := idempotency.New(ctx, c, m, idempotency.WithPrefix(prefix))
	must(t, err)
	f, _ := idempotency.PayloadFingerprint([]byte("p"))
	cl, err := s.Claim(ctx, "acl-x", f)
	must(t, err)
	if _, err := in.Expire(ctx, "acl-x", cl.Fence+1); !errors.Is(err, inspect.ErrLeaseChanged) {
		t.Fatalf("Expire with another fence: %v, want ErrLeaseChanged", err)
	}
	l, err := in.Expire(ctx, "acl-x", cl.Fence)
	if err != nil {
		t.Fatalf("Expire as the least-privilege user: %v", err)
	}
	if l.Fence != cl.Fence {
		t.Fatalf("expired fence %d, want %d", l.Fence, cl.Fence)
	}
	waitLost(t, cl)
}
