package inspect_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/inspect"
)

// An operator program reads a key's story and expires the lease it saw,
// as `worker inspect`, `worker history` and `worker expire --fence` do.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = rdb.Close() }()
	in := inspect.New(rdb, inspect.WithPrefix("lh:"))
	defer func() { _ = in.Close(ctx) }()

	ki, err := in.Key(ctx, "order-42")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ki.State, ki.Fence, ki.Leased, ki.Owner)
	for _, a := range ki.History {
		fmt.Println(a.Attempt, a.Fence, a.Worker, a.End, len(a.Compensations), a.TraceID)
	}
	if ki.Leased {
		if _, err := in.Expire(ctx, "order-42", ki.LeaseFence); err != nil {
			fmt.Println(err) // inspect.ErrLeaseChanged: someone else's lease now
		}
	}
}
