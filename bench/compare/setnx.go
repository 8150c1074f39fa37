package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// setnxCompleted is the pattern's COMPLETED value for an empty result, as
// its Python json.dumps writes it.
const setnxCompleted = `{"status": "COMPLETED", "result": ""}`

// setnxRun runs the common SET NX pattern of blog articles on n keys, conc
// at a time: SET NX of a PROCESSING JSON value with a 300 s TTL, the no-op
// job, then SET of the COMPLETED value with a 24 h TTL. It has no owner
// check on completion, no fence and no renewal. It measures between warm
// and n jobs done.
func setnxRun(ctx context.Context, rdb *redis.Client, run, n, warm, conc int) (window, error) {
	var finished atomic.Int64
	consumer := "consumer-" + strconv.Itoa(run)
	errc := make(chan error, 1)
	go func() {
		var g errgroup.Group
		g.SetLimit(conc)
		for i := range n {
			g.Go(func() error {
				k := fmt.Sprintf("idempotency:v1:sn%d-%d", run, i)
				processing := fmt.Sprintf(`{"status": "PROCESSING", "owner": "%s:%s", "timestamp": %.6f}`,
					consumer, uuid.NewString(), float64(time.Now().UnixNano())/1e9)
				ok, err := rdb.SetNX(ctx, k, processing, 300*time.Second).Result()
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("key %s already set", k)
				}
				if err := rdb.Set(ctx, k, setnxCompleted, 24*time.Hour).Err(); err != nil {
					return err
				}
				finished.Add(1)
				return nil
			})
		}
		errc <- g.Wait()
	}()
	w, err := steady(ctx, rdb, finished.Load, int64(warm), int64(n), 10*time.Minute)
	if err != nil {
		return w, err
	}
	return w, <-errc
}
