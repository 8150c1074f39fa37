// Package pause keeps the fleet-wide list of paused job types in Redis: one
// hash, field = job type, value = when it was paused (Unix milliseconds).
// The Inspector writes it (pause, resume); every worker reads it once per
// lease renew round, whatever the number of records it holds.
package pause

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxTypes bounds the paused types one read returns (HSCAN is not needed:
// a fleet has a few dozen job types).
const maxTypes = 4096

// Key returns the Redis key of the paused job types under prefix.
func Key(prefix string) string { return prefix + "paused" }

// Pause marks typ paused; pausing a paused type keeps its first time.
func Pause(ctx context.Context, c redis.Cmdable, prefix, typ string) error {
	return c.HSetNX(ctx, Key(prefix), typ, strconv.FormatInt(time.Now().UnixMilli(), 10)).Err()
}

// Resume clears typ's pause. It reports whether typ was paused.
func Resume(ctx context.Context, c redis.Cmdable, prefix, typ string) (bool, error) {
	n, err := c.HDel(ctx, Key(prefix), typ).Result()
	return n > 0, err
}

// Read returns the paused job types with when each was paused (one round
// trip). It returns at most maxTypes of them.
func Read(ctx context.Context, c redis.Cmdable, prefix string) (map[string]time.Time, error) {
	m, err := c.HGetAll(ctx, Key(prefix)).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, min(len(m), maxTypes))
	for typ, v := range m {
		if len(out) == maxTypes {
			break
		}
		ms, _ := strconv.ParseInt(v, 10, 64)
		out[typ] = time.UnixMilli(ms)
	}
	return out, nil
}
