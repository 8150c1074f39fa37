package leasing

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holder is a lease as stored in Redis, read without holding it: the owner
// token, the fence and the time left unless renewed. The token is a
// capability (whoever has it may renew and release the lease): show a
// digest of it, never the token.
type Holder struct {
	Token     string
	Fence     uint64
	Remaining time.Duration
}

// PeekCmd is a read of one lease key queued on a pipeline by [Peek]; its
// answer is valid once the pipeline ran.
type PeekCmd struct {
	v   *redis.StringCmd
	ttl *redis.DurationCmd
}

// Peek queues on p the read of the lease stored at key (a key from
// [Manager.Key]): with the renewer, the one place outside the Lua scripts
// that reads the lease layout (a string '<token> <fence> <ttl ms>', then
// ' <cx>' once a cancel is asked: lease_acquire.lua; PX = time left).
func Peek(ctx context.Context, p redis.Pipeliner, key string) *PeekCmd {
	return &PeekCmd{v: p.Get(ctx, key), ttl: p.PTTL(ctx, key)}
}

// Holder returns the lease read, and false when no lease is held there
// (or the read failed: see Err).
func (c *PeekCmd) Holder() (Holder, bool) {
	v, ok := parseValue(c.v.Val())
	if !ok {
		return Holder{}, false
	}
	fen, _ := strconv.ParseUint(v.fence, 10, 64)
	return Holder{Token: v.token, Fence: fen, Remaining: max(c.ttl.Val(), 0)}, true
}

// Value returns the lease key's value as read (empty when none), for a
// script that acts only on the lease read (lease_expire.lua). It holds the
// owner token: never show it.
func (c *PeekCmd) Value() string { return c.v.Val() }

// Err returns the error of the read, if any (a missing key is no error).
func (c *PeekCmd) Err() error {
	if err := c.v.Err(); err != nil && err != redis.Nil { //nolint:errorlint // redis.Nil is returned as is
		return err
	}
	return nil
}

// Watched reads the lease at key inside a WATCH transaction tx, so that an
// action taken in the same transaction applies only to the lease read.
func Watched(ctx context.Context, tx *redis.Tx, key string) (Holder, bool, error) {
	p := tx.Pipeline()
	c := Peek(ctx, p, key)
	if _, err := p.Exec(ctx); err != nil && err != redis.Nil { //nolint:errorlint // redis.Nil is returned as is
		return Holder{}, false, err
	}
	h, ok := c.Holder()
	return h, ok, nil
}
