package cli

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/paystub"
)

// defaultPaystubURL is where `compensations retry` finds the payment stub
// when --payment-stub is not given.
const defaultPaystubURL = "http://127.0.0.1:8099"

// DemoOptions are cmd/worker's additions to the command line, made with the
// options any program uses (see package workercmd): the demo job types
// demo.sleep and demo.transfer (enabled by its flags --pg and
// --payment-stub), their compensation handlers, and the commands demo and
// payment-stub. Each call returns options of their own.
func DemoOptions() []Option {
	var pgURL, payURL *string
	return []Option{
		WithFlags(func(f *FlagSet) {
			pgURL = f.String("pg", "PG_URL", "", "PostgreSQL URL for demo.transfer")
			payURL = f.String("payment-stub", "LEASEHOLD_PAYSTUB_URL", "",
				"payment stub base URL for demo.transfer, e.g. "+defaultPaystubURL+" (compensations: default "+defaultPaystubURL+")")
		}),
		RegisterCompensations(func(_ context.Context, reg *compensation.Registry, s *Setup) error {
			err := registerDemoCompensations(reg, func(_ context.Context, a ReleaseArgs) {
				s.Log.Info("demo.sleep reservation released", slog.Uint64("fence", a.Fence))
			})
			if err != nil {
				return err
			}
			pay := *payURL
			if s.Command == "run" {
				// run refunds demo.transfer charges only with demo.transfer
				// enabled; compensations retry may run them any time.
				if pay == "" || *pgURL == "" {
					return nil
				}
			}
			return demo.RegisterCompensations(reg, paystub.NewClient(cmp.Or(pay, defaultPaystubURL), nil))
		}),
		Register(func(ctx context.Context, w *leasehold.Worker, s *Setup) error {
			if err := registerDemoJobs(w); err != nil {
				return err
			}
			tr, err := openTransfer(ctx, *pgURL, *payURL)
			if err != nil || tr == nil {
				return err
			}
			s.OnClose(tr.close)
			if err := tr.register(w, s.Log); err != nil {
				return err
			}
			s.Log.Info("demo.transfer enabled", slog.String("payment_stub", *payURL))
			return nil
		}),
		WithCommand("payment-stub", "run the local payment provider stub used by demo.transfer", cmdPaymentStub),
		WithCommand("demo", "the make run demo: embedded Kafka, Redis, producer with duplicates, workers, live view", cmdDemo),
	}
}
