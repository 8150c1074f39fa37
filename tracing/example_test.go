package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/outcome"
	"github.com/leasehold/leasehold/tracing"
)

// A Tracer over the program's providers: its KgoOpt goes to every Kafka
// client (leasehold.Enqueue on such a client makes the enqueue span
// itself), and leasehold.WithTracing gives it to the worker, which makes
// the job spans. Here a producer span is made by hand.
func ExampleNew() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr, err := tracing.New(tracing.WithTracerProvider(tp), tracing.WithKeyRedaction(tracing.KeyOmitted))
	if err != nil {
		log.Fatal(err)
	}
	_ = tr.KgoOpt() // kgo.NewClient(kgo.SeedBrokers(...), tr.KgoOpt())

	_, sp := tr.StartEnqueue(context.Background(), "video.transcode", "order-1001")
	sp.End(string(outcome.Error), errors.New("broker unreachable"))

	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == tracing.AttrOutcome {
				fmt.Println(s.Name, a.Value.AsString(), s.Status.Description)
			}
		}
	}
	// Output:
	// enqueue video.transcode error broker unreachable
}
