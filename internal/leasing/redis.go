package leasing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/slot"
)

// redisBackend is the Redis Lua backend: one script per operation, renewals
// pipelined. A redis.ClusterClient pipeline splits itself per node.
type redisBackend struct {
	c      redis.UniversalClient
	prefix string
	// native: the server takes GETEX, so renewals use plain
	// commands (renew_native.go); set by Check, false until then.
	native atomic.Bool
}

// NewRedisBackend returns the Redis Lua backend that [NewManager] uses, with
// lease keys under prefix (see [Manager.Key]). It is exported for wrapping
// (fault injection, instrumentation) and for [NewManagerWithBackend].
func NewRedisBackend(c redis.UniversalClient, prefix string) Backend {
	return &redisBackend{c: c, prefix: prefix}
}

// KeyFor returns the Redis key of lease name under prefix: prefix +
// "lease:{" + name + "}", or prefix + "lease:" + name when name already holds a
// Cluster hash tag ("{...}" with at least one byte inside), so that the
// caller's tag decides the slot.
func KeyFor(prefix, name string) string {
	if hasHashTag(name) {
		return prefix + leaseKind + name
	}
	return prefix + leaseKind + "{" + name + "}"
}

// leaseKind follows the prefix in every lease key.
const leaseKind = "lease:"

// hasHashTag applies the Redis Cluster rule: the first '{', then the first '}'
// after it, with at least one byte between them.
func hasHashTag(s string) bool {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(s[i+1:], '}')
	return j > 0
}

func (b *redisBackend) Key(name string) string { return KeyFor(b.prefix, name) }

func ms(d time.Duration) int64 { return max(1, d.Milliseconds()) }

func fenceArg(f uint64) string { return strconv.FormatUint(f, 10) }

func (b *redisBackend) Acquire(ctx context.Context, name, token string, ttl time.Duration) (Grant, error) {
	// The token is the first word of the lease key's value (lease_acquire.lua).
	if token == "" || strings.IndexFunc(token, unicode.IsSpace) >= 0 {
		return Grant{}, fmt.Errorf("%w: owner token %q is empty or has white space", ErrInvalid, token)
	}
	res, err := scripts.LeaseAcquire.Run(ctx, b.c, []string{b.Key(name)}, token, ms(ttl)).Slice()
	if err != nil {
		return Grant{}, Classify(err)
	}
	if len(res) < 2 {
		return Grant{}, fmt.Errorf("lease: acquire script: unexpected reply %v", res)
	}
	switch code, _ := res[0].(int64); code {
	case scripts.LeaseOK:
		s, _ := res[1].(string)
		fence, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return Grant{}, fmt.Errorf("lease: acquire script: bad fence %q: %w", s, err)
		}
		return Grant{Name: name, Token: token, Fence: fence, TTL: ttl}, nil
	case scripts.LeaseOtherOwner:
		he := &HeldError{Name: name}
		he.Token, _ = res[1].(string)
		if len(res) > 2 {
			if pttl, ok := res[2].(int64); ok && pttl > 0 {
				he.Remaining = time.Duration(pttl) * time.Millisecond
			}
		}
		return Grant{}, he
	default:
		return Grant{}, fmt.Errorf("lease: acquire script: unexpected reply %v", res)
	}
}

// ownerErr maps a lease script status to the Manager's errors.
func ownerErr(code int64) error {
	switch code {
	case scripts.LeaseOK:
		return nil
	case scripts.LeaseNoOwner:
		return ErrExpired
	case scripts.LeaseOtherOwner:
		return ErrStolen
	default:
		return fmt.Errorf("lease: unexpected script status %d", code)
	}
}

// maxRenewPerCall bounds the leases renewed by one script call (the size of
// its KEYS and ARGV).
const maxRenewPerCall = 256

// RenewBatch renews rs in one pipeline: with plain commands where the server
// takes GETEX (renew_native.go), else with as few script calls as
// possible: on a single node, up to maxRenewPerCall leases a call; on a
// Cluster (or any client that shards), one call per hash slot, since a script
// may only touch one slot.
func (b *redisBackend) RenewBatch(ctx context.Context, rs []Renewal) []RenewResult {
	if b.native.Load() {
		return b.renewNative(ctx, rs)
	}
	out := make([]RenewResult, len(rs))
	groups := b.renewGroups(rs)
	cmds, err := b.renewPipe(ctx, rs, groups)
	if err != nil && isNoScript(cmds) {
		// The script cache was flushed (restart, SCRIPT FLUSH, failover):
		// load the script (on every shard of a Cluster) and send again.
		_ = scripts.LeaseRenew.Load(ctx, b.c).Err()
		cmds, _ = b.renewPipe(ctx, rs, groups)
	}
	for g, c := range cmds {
		idx := groups[g]
		codes, err := c.Int64Slice()
		if err == nil && len(codes) != len(idx) {
			err = fmt.Errorf("lease: renew script answered %d statuses for %d leases", len(codes), len(idx))
		}
		for k, i := range idx {
			if err != nil {
				out[i].Err = Classify(err)
				continue
			}
			if codes[k] == scripts.LeaseCancelled {
				out[i].Cancelled = true
				continue
			}
			out[i].Err = ownerErr(codes[k])
		}
	}
	return out
}

// renewGroups splits rs into the index sets of one script call each.
func (b *redisBackend) renewGroups(rs []Renewal) [][]int {
	var groups [][]int
	if _, single := b.c.(*redis.Client); single {
		for start := 0; start < len(rs); start += maxRenewPerCall {
			g := make([]int, 0, min(maxRenewPerCall, len(rs)-start))
			for i := start; i < min(start+maxRenewPerCall, len(rs)); i++ {
				g = append(g, i)
			}
			groups = append(groups, g)
		}
		return groups
	}
	bySlot := make(map[uint16]int) // slot -> index of its open group
	for i, r := range rs {
		ks := slot.Of(b.Key(r.Name))
		gi, ok := bySlot[ks]
		if !ok || len(groups[gi]) == maxRenewPerCall {
			gi = len(groups)
			groups = append(groups, nil)
			bySlot[ks] = gi
		}
		groups[gi] = append(groups[gi], i)
	}
	return groups
}

func (b *redisBackend) renewPipe(ctx context.Context, rs []Renewal, groups [][]int) ([]*redis.Cmd, error) {
	pipe := b.c.Pipeline()
	cmds := make([]*redis.Cmd, len(groups))
	for g, idx := range groups {
		keys := make([]string, len(idx))
		args := make([]any, 0, 3*len(idx))
		for k, i := range idx {
			r := rs[i]
			keys[k] = b.Key(r.Name)
			args = append(args, r.Token, fenceArg(r.Fence), ms(r.TTL))
		}
		cmds[g] = scripts.LeaseRenew.EvalSha(ctx, pipe, keys, args...)
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

func isNoScript(cmds []*redis.Cmd) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			return true
		}
	}
	return false
}

func (b *redisBackend) Release(ctx context.Context, name, token string, fence uint64) error {
	code, err := scripts.LeaseRelease.Run(ctx, b.c, []string{b.Key(name)}, token, fenceArg(fence)).Int64()
	if err != nil {
		return Classify(err)
	}
	return ownerErr(code)
}

func (b *redisBackend) Fenced(ctx context.Context, name, token string, fence uint64, s *redis.Script, keys []string, args []any) (any, error) {
	k := make([]string, 0, 1+len(keys))
	k = append(append(k, b.Key(name)), keys...)
	a := make([]any, 0, 2+len(args))
	a = append(append(a, token, fenceArg(fence)), args...)
	res, err := s.Run(ctx, b.c, k, a...).Result()
	if err != nil {
		return res, Classify(err)
	}
	return res, nil
}

// Check pings Redis, refuses a maxmemory-policy that evicts keys, and loads
// the lease scripts.
func (b *redisBackend) Check(ctx context.Context) error {
	if err := b.c.Ping(ctx).Err(); err != nil {
		return Classify(err)
	}
	p, err := b.policy(ctx)
	switch {
	case err != nil && Transient(err):
		return Classify(err)
	case strings.HasPrefix(p, "allkeys-") || strings.HasPrefix(p, "volatile-"):
		return fmt.Errorf("%w: %s", ErrEvictionPolicy, p)
	}
	for _, s := range []*redis.Script{scripts.LeaseAcquire, scripts.LeaseRenew, scripts.LeaseRelease} {
		if err := s.Load(ctx, b.c).Err(); err != nil {
			return Classify(err)
		}
	}
	return b.probeNative(ctx)
}

// probeNative sets b.native when the server takes GETEX (Redis 6.2), trying
// it on a key of the prefix that no lease uses (GETEX on a missing key
// changes nothing). A server that refuses the command keeps the script
// path.
func (b *redisBackend) probeNative(ctx context.Context) error {
	err := b.c.GetEx(ctx, b.prefix+"probe:getex", time.Millisecond).Err()
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if err != nil && Transient(err) {
		return Classify(err)
	}
	b.native.Store(err == nil)
	return nil
}

// policy reads maxmemory-policy with CONFIG GET or, where the server refuses
// CONFIG (an ACL user without it; managed services disable or rename it),
// from INFO memory. Where both are refused it answers "" and no error: the
// idempotency store, which needs the policy, refuses to start instead
// unless the policy is stated.
func (b *redisBackend) policy(ctx context.Context) (string, error) {
	pol, err := b.c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err == nil {
		return pol["maxmemory-policy"], nil
	}
	if Transient(err) {
		return "", err
	}
	info, err := b.c.Info(ctx, "memory").Result()
	if err != nil {
		if Transient(err) {
			return "", err
		}
		return "", nil
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			return v, nil
		}
	}
	return "", nil
}

// TaggedKeyPrefix returns, for a Manager over the Redis backend, what the
// key of a lease whose name holds a Cluster hash tag starts with: Key(name)
// is that prefix and name (KeyFor), so that a caller building many names'
// keys can build them in one string. It returns "" for any other backend,
// whose keys are Key's to name.
func TaggedKeyPrefix(m *Manager) string {
	if b, isRedis := m.b.(*redisBackend); isRedis {
		return b.prefix + leaseKind
	}
	return ""
}
