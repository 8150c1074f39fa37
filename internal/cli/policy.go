package cli

import (
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/idempotency"
)

// maxmemoryPolicies are the values of Redis's maxmemory-policy.
var maxmemoryPolicies = []string{"noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
	"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}

// policyFlag defines --redis-maxmemory-policy on f: the operator states the
// server's maxmemory-policy, and the worker does not read it from Redis
// (CONFIG GET, or INFO where CONFIG is refused). The operator vouches for it:
// a stated noeviction on a server that evicts lets leases and records
// vanish. A stated evicting policy is refused like a read one.
func policyFlag(f *flags) *string {
	return f.str("redis-maxmemory-policy", "LEASEHOLD_REDIS_MAXMEMORY_POLICY", "",
		"state Redis's maxmemory-policy instead of reading it (CONFIG GET, else INFO), for a Redis user or "+
			"managed service that allows neither; you vouch for it")
}

// storeOpts are the idempotency options of run's flags: the maxmemory
// policy stated, and the shard count when one is set.
func (c *runConfig) storeOpts() ([]idempotency.Opt, error) {
	opts, err := policyOpts(*c.maxmemoryPolicy)
	if c.shards > 0 {
		opts = append(opts, idempotency.WithShards(c.shards))
	}
	return opts, err
}

// policyOpts checks a stated policy and returns the store option for it (none
// when not stated).
func policyOpts(policy string) ([]idempotency.Opt, error) {
	if policy == "" {
		return nil, nil
	}
	if !slices.Contains(maxmemoryPolicies, policy) {
		return nil, usagef("redis maxmemory-policy %q: want one of %v", policy, maxmemoryPolicies)
	}
	return []idempotency.Opt{idempotency.WithMaxmemoryPolicy(policy)}, nil
}

// policyHint adds the command-line way to state the policy to an error that
// says the policy could not be read (which names the Go option).
func policyHint(err error) error {
	if !errors.Is(err, idempotency.ErrPolicyUnknown) {
		return err
	}
	return fmt.Errorf("%w; on the command line: --redis-maxmemory-policy noeviction "+
		"(env LEASEHOLD_REDIS_MAXMEMORY_POLICY) if you vouch that the server does not evict keys", err)
}
