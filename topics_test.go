package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStartRefusesMissingTopics: a worker whose topic or dead-letter topic
// does not exist fails to start with ErrTopicMissing naming it, instead of
// waiting silently for records (or, for the dead-letter topic, blocking a
// partition at its first poison record).
func TestStartRefusesMissingTopics(t *testing.T) {
	h := setup(t, 1)
	noop := func(w *Worker) {
		must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	}
	try := func(opts ...Opt) error {
		w, err := New(h.rdb, h.opts(opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		noop(w)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err = w.Start(ctx)
		_ = w.Shutdown(ctx)
		return err
	}
	for name, c := range map[string]struct {
		opts    []Opt
		missing string
	}{
		"topic":             {[]Opt{WithTopics(h.topic + "-absent")}, h.topic + "-absent"},
		"dead-letter topic": {[]Opt{WithDeadLetterTopic(h.topic + ".absent-dlq")}, h.topic + ".absent-dlq"},
	} {
		err := try(c.opts...)
		if !errors.Is(err, ErrTopicMissing) || !strings.Contains(err.Error(), c.missing) {
			t.Errorf("%s missing: Start = %v, want ErrTopicMissing naming %s", name, err, c.missing)
		}
	}
	if err := try(); err != nil {
		t.Errorf("both topics exist: Start = %v", err)
	}
}

// TestStartWhileKafkaUnreachable: a worker started while no broker answers
// (a restart during a broker outage) starts, logging that it could not check
// its topics, instead of exiting; its client retries until Kafka is back.
func TestStartWhileKafkaUnreachable(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	logs := &testkit.LogSink{}
	w, err := New(h.rdb, h.opts(WithKafka(kgo.SeedBrokers("127.0.0.1:1")), WithLogger(slog.New(logs)))...)
	must(t, err)
	must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start with no broker answering = %v, want a started worker", err)
	}
	_ = w.Shutdown(ctx)
	if !logs.Has("could not read topic metadata from Kafka; starting without checking that the topics exist") {
		t.Error("the skipped topic check was not logged")
	}
}
