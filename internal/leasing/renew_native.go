package leasing

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Renewing without a script. A lease key is a hash whose owner token (tok) is
// new with every acquisition and never written again by anyone else; only a
// new acquisition replaces it. Renewing sends two plain commands a lease, in
// this order, pipelined:
//
//	PEXPIRE key ttl GT      extend the key's expiry, never shorten it
//	HMGET key tok fen cx    then read who holds it
//
// If the HMGET answers the caller's token, the key held that token from the
// caller's acquisition until the read (a token never comes back once
// replaced), so the PEXPIRE before it extended the caller's own lease: the
// lease is renewed. If it answers another token, the lease was stolen or
// taken over, and the PEXPIRE may have extended the new holder's expiry to
// at most now + ttl (GT never shortens it): the same bound the holder's own
// renewal sets, and the caller stops renewing that key at once. A key that is
// gone, or that has no owner, is lost (PEXPIRE on a missing key does
// nothing). cx is the fence of an attempt an operator asked to cancel (see
// lease_cancel.lua), as the script path reads it.
//
// Each step is one of Redis's cheapest commands: the script path (one
// lease_renew.lua call per up to maxRenewPerCall leases) spends most of its
// time in the Lua interpreter, about three times a pipelined PEXPIRE; this
// path costs about two (go run ./bench/renew). It needs PEXPIRE's GT flag
// (Redis 7.0): [redisBackend.Check] probes for it, and a server without it
// keeps the script path. No slot grouping is needed: every command names one
// key, and a Cluster client's pipeline splits itself per node, keeping each
// key's commands in order.

// renewNative renews rs with the plain commands above, in one pipeline.
func (b *redisBackend) renewNative(ctx context.Context, rs []Renewal) []RenewResult {
	out := make([]RenewResult, len(rs))
	pipe := b.c.Pipeline()
	extends := make([]*redis.Cmd, len(rs))
	reads := make([]*redis.SliceCmd, len(rs))
	for i, r := range rs {
		key := b.Key(r.Name)
		extends[i] = pipe.Do(ctx, "pexpire", key, ms(r.TTL), "gt")
		reads[i] = pipe.HMGet(ctx, key, "tok", "fen", "cx")
	}
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	for i, r := range rs {
		if err := extends[i].Err(); err != nil {
			out[i].Err = Classify(err) // not extended: transient, retried next round
			continue
		}
		out[i] = nativeResult(r, reads[i])
	}
	return out
}

// nativeResult reads one lease's HMGET answer.
func nativeResult(r Renewal, read *redis.SliceCmd) RenewResult {
	v, err := read.Result()
	if err != nil {
		return RenewResult{Err: Classify(err)}
	}
	if len(v) != 3 {
		return RenewResult{Err: errors.New("lease: renew: HMGET answered a wrong number of fields")}
	}
	tok, _ := v[0].(string)
	fen, _ := v[1].(string)
	switch {
	case v[0] == nil:
		return RenewResult{Err: ErrExpired}
	case tok != r.Token || fen != fenceArg(r.Fence):
		return RenewResult{Err: ErrStolen}
	}
	cx, _ := v[2].(string)
	return RenewResult{Cancelled: v[2] != nil && cx == fen}
}
