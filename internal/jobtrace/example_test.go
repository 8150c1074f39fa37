package jobtrace_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/outcome"
)

func ExampleTracer_StartJob() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr, err := jobtrace.New(jobtrace.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}

	// r comes from PollFetches on a client built with tr.KgoOpt().
	r := &kgo.Record{Topic: "jobs", Partition: 0, Offset: 42}
	ctx, job := tr.StartJob(context.Background(), r, "video.transcode", "order-1001")
	job.SetAttempt(1)

	_, claim := job.StartClaim(ctx)
	claim.SetFence(7)
	claim.End("acquired", nil)
	job.SetFence(7)

	hctx, h := job.StartHandler(ctx)
	_ = hctx // the handler runs with hctx
	job.Heartbeat()
	h.End(jobtrace.OutcomeCompleted, nil)

	_, commit := job.StartCommit(ctx)
	commit.End(jobtrace.OutcomeCommitted, nil)
	job.End(outcome.Completed, nil)

	for _, s := range exp.GetSpans() {
		fmt.Println(s.Name)
	}
	// Output:
	// claim
	// handler
	// commit
	// process jobs
}
