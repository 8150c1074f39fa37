package leasing

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Renewing without a script. A lease key is a string '<token> <fence> <ttl
// ms>', then ' <cx>' once an operator asked the attempt under fence
// cx to cancel (lease_acquire.lua, lease_cancel.lua). Its token is new with
// every acquisition and never written again by anyone else; only a new
// acquisition replaces it. Renewing sends one plain command a lease,
// pipelined:
//
//	GETEX key PX ttl     set the key's expiry to now + ttl and return its value
//
// If the value starts with the caller's token and fence, the key held them
// from the caller's acquisition until this command (a token never comes back
// once replaced), so the expiry set was the caller's own lease's: the lease
// is renewed. If it holds another token, the lease was stolen or taken over,
// and the GETEX set the new holder's expiry to now + the caller's ttl, which
// may be shorter than the holder's own: the renewer answers it at once with
// PEXPIRE key <the holder's ttl, from its value>, which puts the expiry at or
// past where the holder had it (its deadline was at most its last renewal +
// its ttl), and stops renewing that key. A key that is gone is lost (GETEX
// on a missing key does nothing).
//
// Each step is one of Redis's cheapest commands: the script path (one
// lease_renew.lua call per up to maxRenewPerCall leases) spends most of its
// time in the Lua interpreter, about three times a pipelined PEXPIRE; this
// path costs about one (go run ./bench/renew). It needs GETEX (Redis 6.2):
// [redisBackend.Check] probes for it, and a server without it keeps the
// script path. No slot grouping is needed: every command names one key, and
// a Cluster client's pipeline splits itself per node, keeping each key's
// commands in order.

// renewNative renews rs with the plain commands above, in one pipeline.
func (b *redisBackend) renewNative(ctx context.Context, rs []Renewal) []RenewResult {
	out := make([]RenewResult, len(rs))
	pipe := b.c.Pipeline()
	reads := make([]*redis.StringCmd, len(rs))
	for i, r := range rs {
		// PX always, in milliseconds of at least 1 (ms): go-redis's GetEx
		// would send PERSIST for a zero TTL, which makes a lease permanent.
		reads[i] = redis.NewStringCmd(ctx, "getex", b.Key(r.Name), "px", ms(r.TTL))
		_ = pipe.Process(ctx, reads[i])
	}
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	var restore redis.Pipeliner
	for i, r := range rs {
		var holderTTL int64
		out[i], holderTTL = nativeResult(r, reads[i])
		if holderTTL > 0 {
			if restore == nil {
				restore = b.c.Pipeline()
			}
			restore.PExpire(ctx, b.Key(r.Name), time.Duration(holderTTL)*time.Millisecond)
		}
	}
	if restore != nil {
		// Best effort: a failure leaves the new holder's expiry at now + the
		// caller's ttl, which its own next renewal corrects.
		_, _ = restore.Exec(ctx)
	}
	return out
}

// nativeResult reads one lease's GETEX answer. When another owner holds the
// key it also returns that owner's TTL in milliseconds (0 when unreadable),
// to put back.
func nativeResult(r Renewal, read *redis.StringCmd) (RenewResult, int64) {
	v, err := read.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return RenewResult{Err: ErrExpired}, 0
	case err != nil:
		return RenewResult{Err: Classify(err)}, 0
	}
	h, ok := parseValue(v)
	if !ok || h.token != r.Token || h.fence != fenceArg(r.Fence) {
		return RenewResult{Err: ErrStolen}, h.ttl
	}
	return RenewResult{Cancelled: h.cancel == h.fence}, 0
}

// value is a lease key's string, split: token, fence (decimal text), the
// holder's ttl in milliseconds, and the fence an operator asked to cancel
// ("" for none).
type value struct {
	token, fence string
	ttl          int64
	cancel       string
}

// parseValue splits a lease key's string; false when it is not one.
func parseValue(v string) (value, bool) {
	parts := strings.SplitN(v, " ", 5) // a fifth part: written by a later layout, ignored
	if len(parts) < 3 || parts[0] == "" {
		return value{}, false
	}
	if _, err := strconv.ParseUint(parts[1], 10, 64); err != nil {
		return value{}, false
	}
	ttl, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || ttl <= 0 {
		return value{}, false
	}
	out := value{token: parts[0], fence: parts[1], ttl: ttl}
	if len(parts) > 3 {
		out.cancel = parts[3]
	}
	return out, true
}
