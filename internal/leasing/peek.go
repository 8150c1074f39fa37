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
	h   *redis.SliceCmd
	ttl *redis.DurationCmd
}

// Peek queues on p the read of the lease stored at key (a key from
// [Manager.Key]): the one place outside the Lua scripts that reads the
// lease layout (a hash: tok = owner token, fen = fence; PX = time left).
func Peek(ctx context.Context, p redis.Pipeliner, key string) *PeekCmd {
	return &PeekCmd{h: p.HMGet(ctx, key, "tok", "fen"), ttl: p.PTTL(ctx, key)}
}

// Holder returns the lease read, and false when no lease is held there
// (or the read failed: see Err).
func (c *PeekCmd) Holder() (Holder, bool) {
	v := c.h.Val()
	if len(v) != 2 {
		return Holder{}, false
	}
	tok, _ := v[0].(string)
	if tok == "" {
		return Holder{}, false
	}
	fs, _ := v[1].(string)
	fen, _ := strconv.ParseUint(fs, 10, 64)
	return Holder{Token: tok, Fence: fen, Remaining: max(c.ttl.Val(), 0)}, true
}

// Err returns the error of the read, if any (a missing key is no error).
func (c *PeekCmd) Err() error {
	if err := c.h.Err(); err != nil && err != redis.Nil { //nolint:errorlint // redis.Nil is returned as is
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
