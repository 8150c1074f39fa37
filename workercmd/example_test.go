package workercmd_test

import (
	"context"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/workercmd"
)

type thumbnail struct {
	URL string `json:"url"`
}

func render(ctx context.Context, job *leasehold.Job, in thumbnail) (string, error) {
	return "rendered " + in.URL, nil
}

// A program's main: one job type, and a flag of its own (with its
// environment variable) that the register function reads.
func ExampleMain() {
	var timeout *time.Duration
	workercmd.Main(
		workercmd.WithFlags(func(f *workercmd.FlagSet) {
			timeout = f.Duration("render-timeout", "THUMBS_RENDER_TIMEOUT", time.Minute, "longest a render may take")
		}),
		workercmd.Register(func(_ context.Context, w *leasehold.Worker, _ *workercmd.Setup) error {
			return w.Register("thumbnail.render", leasehold.Typed(func(ctx context.Context, job *leasehold.Job, in thumbnail) (string, error) {
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				return render(ctx, job, in)
			}))
		}),
	)
}
