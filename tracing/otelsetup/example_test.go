package otelsetup_test

import (
	"context"
	"log"
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/tracing"
	"github.com/leasehold/leasehold/tracing/otelsetup"
)

// A worker's main: providers from OTEL_* (for example
// OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318), /metrics on the HTTP
// listener, kotel hooks on the Kafka client, and a flush at exit.
func ExampleSetup() {
	ctx := context.Background()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithServiceName("leasehold-worker"))
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
