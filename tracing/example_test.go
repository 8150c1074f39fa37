package tracing_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/tracing"
)

// A worker's main: providers from OTEL_* (for example
// OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318), /metrics on the HTTP
// listener, kotel hooks on the Kafka client, and a flush at exit.
func ExampleSetup() {
	ctx := context.Background()
	tel, shutdown, err := tracing.Setup(ctx, tracing.WithServiceName("leasehold-worker"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }() // flushes buffered spans

	tr, err := tracing.New(tracing.WithTelemetry(tel), tracing.WithConsumerGroup("workers"))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", tel.MetricsHandler)

	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.ConsumeTopics("jobs"), tr.KgoOpt())
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
}

func ExampleTracer_StartJob() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr, err := tracing.New(tracing.WithTracerProvider(tp))
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
	h.End(tracing.OutcomeCompleted, nil)

	_, commit := job.StartCommit(ctx)
	commit.End(tracing.OutcomeCommitted, nil)
	job.End(tracing.OutcomeCompleted, nil)

	for _, s := range exp.GetSpans() {
		fmt.Println(s.Name)
	}
	// Output:
	// claim
	// handler
	// commit
	// process jobs
}
