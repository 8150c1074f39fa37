package leasehold

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestLeastPrivilegeRedisUser starts workers as a Redis user with the
// README's least-privilege ACL (testkit.ProjectACLRules: keys under the
// prefix, +@read +@write +@scripting +@connection +time -@dangerous, the
// default user off), where neither CONFIG GET nor INFO is allowed. Without
// more the worker refuses to start, saying how to fix it; with the policy
// stated, or with +info added to the ACL (the policy is then read from INFO),
// it starts and runs a job.
func TestLeastPrivilegeRedisUser(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	const password = "lp-s3cret"
	rules := testkit.ProjectACLRules("lh:")
	srv := testkit.StartRedis(t,
		testkit.WithACLUser("readme", password, rules...),
		testkit.WithRedisConfig("user with-info on >"+password+" "+strings.Join(append(rules, "+info"), " ")))
	client := func(user string) *redis.Client {
		o := srv.Options()
		o.Username, o.Password = user, password
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	w, err := New(client("readme"), h.opts(WithKeyPrefix("lh:"))...)
	must(t, err)
	must(t, w.Register("lp", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	err = w.Start(ctx)
	if !errors.Is(err, idempotency.ErrPolicyUnknown) || !strings.Contains(err.Error(), "+info") {
		t.Fatalf("Start as the README's user, policy not stated = %v, want ErrPolicyUnknown naming +info", err)
	}
	_ = w.Shutdown(ctx)

	done := make(chan string, 2)
	handler := func(_ context.Context, j *Job) ([]byte, error) { done <- j.Key; return []byte("ok"), nil }
	for _, tc := range []struct {
		user string
		opts []Opt
	}{
		{"readme", []Opt{WithIdempotencyOptions(idempotency.WithMaxmemoryPolicy("noeviction"))}},
		{"with-info", nil},
	} {
		w := h.start(t, client(tc.user), func(w *Worker) { must(t, w.Register("lp", handler)) },
			append([]Opt{WithKeyPrefix("lh:")}, tc.opts...)...)
		key := "lp-" + tc.user
		h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "lp", Key: key, Topic: h.topic})})
		select {
		case got := <-done:
			if got != key {
				t.Fatalf("ran %q, want %q", got, key)
			}
		case <-ctx.Done():
			t.Fatalf("job %s did not run as user %s", key, tc.user)
		}
		must(t, w.Shutdown(ctx)) // the next user's worker takes the partition
	}
}
