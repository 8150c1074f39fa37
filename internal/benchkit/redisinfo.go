package benchkit

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisMainCPU returns the CPU seconds (user + system) of the Redis server's
// main thread (INFO cpu): divided by the work done between two readings, the
// server-side cost of a unit of work, which bounds throughput on Redis's
// single command thread whatever the clients do.
func RedisMainCPU(ctx context.Context, c *redis.Client) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	found := 0
	for line := range strings.Lines(info) {
		for _, name := range []string{"used_cpu_sys_main_thread:", "used_cpu_user_main_thread:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, err
				}
				total += f
				found++
			}
		}
	}
	if found != 2 {
		return 0, errors.New("INFO cpu has no main-thread figures (Redis 6.2 or later needed)")
	}
	return total, nil
}
