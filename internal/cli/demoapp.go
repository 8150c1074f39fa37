package cli

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
)

// defaultPaystubURL is where `compensations retry` finds the payment stub
// when --payment-stub is not given.
const defaultPaystubURL = "http://127.0.0.1:8099"

// DevParts are the development pieces that cmd/worker links and a team's
// binary does not: an in-memory Kafka (kfake), the payment stub, and the
// PostgreSQL side of demo.transfer. This package holds no reference to them,
// so that a program built with workercmd stays free of kfake, pgx and the
// demo; cmd/worker fills them in (see [DemoOptions]).
type DevParts struct {
	// StartKafka starts an in-memory Kafka on host:port with topics (name to
	// partitions) seeded; groupMinSession 0 is the broker's default. It
	// returns the addresses and a stop function.
	StartKafka func(ctx context.Context, host string, port int, topics map[string]int32,
		groupMinSession time.Duration) (addrs []string, stop func(), err error)
	// ServePaymentStub serves the payment stub on ln until ctx ends.
	ServePaymentStub func(ctx context.Context, ln net.Listener, log *slog.Logger) error
	// OpenTransfer readies demo.transfer (both URLs set) or returns a nil
	// register (neither set); an error that is [ErrDevConfig] is a usage error.
	OpenTransfer func(ctx context.Context, pgURL, payURL string) (register func(*leasehold.Worker, *slog.Logger) error, close func(), err error)
	// RegisterRefunds registers demo.transfer's refund compensation, which
	// calls the payment stub at payURL.
	RegisterRefunds func(reg *compensation.Registry, payURL string) error
	// ErrDevConfig marks OpenTransfer's errors that are bad flag values.
	ErrDevConfig error
}

// DemoOptions are cmd/worker's additions to the command line, made with the
// options any program uses (see package workercmd) over the parts p: the
// demo job types demo.sleep and demo.transfer (enabled by its flags --pg and
// --payment-stub), their compensation handlers, the in-memory Kafka of `run
// --embedded-kafka`, and the commands demo, dev-broker and payment-stub. Each
// call returns options of their own.
func DemoOptions(p DevParts) []Option {
	var pgURL, payURL *string
	return []Option{
		optFunc(func(a *App) { a.dev = p }),
		WithFlags(func(f *FlagSet) {
			pgURL = f.String("pg", "PG_URL", "", "PostgreSQL URL for demo.transfer")
			payURL = f.String("payment-stub", "LEASEHOLD_PAYSTUB_URL", "",
				"payment stub base URL for demo.transfer, e.g. "+defaultPaystubURL+" (compensations: default "+defaultPaystubURL+")")
		}),
		RegisterCompensations(func(_ context.Context, reg *compensation.Registry, s *Setup) error {
			return registerDemoRefunds(reg, s, p, *pgURL, *payURL)
		}),
		Register(func(ctx context.Context, w *leasehold.Worker, s *Setup) error {
			return registerDemo(ctx, w, s, p, *pgURL, *payURL)
		}),
		WithCommand("dev-broker", "run a standalone in-memory Kafka (kfake) on an address, with topics", cmdDevBroker),
		WithCommand("payment-stub", "run the local payment provider stub used by demo.transfer", cmdPaymentStub),
		WithCommand("demo", "the make run demo: embedded Kafka, Redis, producer with duplicates, workers, live view", cmdDemo),
	}
}

// registerDemoRefunds registers demo.sleep's release handler and, where
// demo.transfer may have charged, its refund.
func registerDemoRefunds(reg *compensation.Registry, s *Setup, p DevParts, pgURL, payURL string) error {
	err := registerDemoCompensations(reg, func(_ context.Context, a ReleaseArgs) {
		s.Log.Info("demo.sleep reservation released", slog.Uint64("fence", a.Fence))
	})
	if err != nil {
		return err
	}
	if s.Command == "run" {
		// run refunds demo.transfer charges only with demo.transfer
		// enabled; compensations retry may run them any time.
		if payURL == "" || pgURL == "" {
			return nil
		}
	}
	return p.RegisterRefunds(reg, cmp.Or(payURL, defaultPaystubURL))
}

// registerDemo registers demo.sleep and, with --pg and --payment-stub,
// demo.transfer.
func registerDemo(ctx context.Context, w *leasehold.Worker, s *Setup, p DevParts, pgURL, payURL string) error {
	if err := registerDemoJobs(w); err != nil {
		return err
	}
	register, closeTransfer, err := p.OpenTransfer(ctx, pgURL, payURL)
	if err != nil {
		if p.ErrDevConfig != nil && errors.Is(err, p.ErrDevConfig) {
			return usagef("%v", err)
		}
		return err
	}
	if register == nil {
		return nil
	}
	s.OnClose(closeTransfer)
	if err := register(w, s.Log); err != nil {
		return err
	}
	s.Log.Info("demo.transfer enabled", slog.String("payment_stub", payURL))
	return nil
}
