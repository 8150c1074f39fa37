package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/devkafka"
	"github.com/leasehold/leasehold/internal/paystub"
)

// testDevParts are cmd/worker's development parts (cmd/worker/main.go fills
// them in the same way).
var testDevParts = DevParts{
	StartKafka:       devkafka.Start,
	ServePaymentStub: paystub.ServeNew,
	OpenTransfer:     demo.Open,
	RegisterRefunds:  demo.RegisterRefunds,
	ErrDevConfig:     demo.ErrTransferConfig,
}

// Main runs cmd/worker's command line (this package's commands and the
// demo's) and returns the process exit code, as [Run].
func Main(ctx context.Context, args []string, e *Env) int {
	return Run(ctx, args, e, DemoOptions(testDevParts)...)
}

// enqueue's demo.transfer payloads decode as package demo's transfers.
func TestTransferPayloadMatchesDemo(t *testing.T) {
	t.Parallel()
	b := payloadFor(enqueueConfig{typ: demo.TransferType, accounts: 10}, 3)
	got, err := demo.ParseTransfer(b)
	if err != nil {
		t.Fatalf("demo.ParseTransfer(%s): %v", b, err)
	}
	if want := (demo.TransferArgs{From: "acct-3", To: "acct-4", Amount: 1}); got != want {
		t.Errorf("transfer payload decodes as %+v, want %+v", got, want)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil || len(fields) != 3 {
		t.Errorf("payload %s: want exactly from, to and amount", b)
	}
}

// A program without cmd/worker's parts (a team's binary) refuses
// --embedded-kafka with a usage error, and has no dev-broker command.
func TestNoEmbeddedKafkaWithoutDevParts(t *testing.T) {
	t.Parallel()
	url, prefix, _ := sharedRedisURL(t)
	var out, errb syncBuffer
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	e := &Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	code := Run(context.Background(), []string{"run", "--embedded-kafka"}, e)
	wantFailure(t, result{code, out.String(), errb.String()}, 2, "no in-memory Kafka: pass --brokers")
	code = Run(context.Background(), []string{"dev-broker"}, &Env{Stdout: &out, Stderr: &errb})
	if code != 2 {
		t.Errorf("dev-broker without the parts: exit %d, want 2 (unknown command)", code)
	}
}
