// Command worker runs leasehold workers and the tools around them. It is a
// program built with package workercmd, like a team's own binary: the
// worker's commands (run, enqueue, inspect, leases, expire, reset, dlq,
// capacity, compensations, ...) plus the demo's job types (demo.sleep, and
// demo.transfer with --pg and --payment-stub), the in-memory Kafka of `run
// --embedded-kafka`, and the commands demo, dev-broker and payment-stub.
// `worker help` lists the commands; `worker <command> -h` their flags;
// docs/flags.md all of them.
//
// The first SIGINT or SIGTERM shuts a command down gracefully (`worker run`
// lets running jobs finish within --shutdown-timeout); a second one forces
// the exit (running jobs are cancelled and their leases released); a third
// one ends the process at once.
package main

import (
	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/devkafka"
	"github.com/leasehold/leasehold/internal/paystub"
	"github.com/leasehold/leasehold/workercmd"
)

// devParts are the development pieces only this binary links: a team's
// binary built with workercmd holds no kfake, pgx or demo code.
var devParts = cli.DevParts{
	StartKafka:       devkafka.Start,
	ServePaymentStub: paystub.ServeNew,
	OpenTransfer:     demo.Open,
	RegisterRefunds:  demo.RegisterRefunds,
	ErrDevConfig:     demo.ErrTransferConfig,
}

func main() {
	workercmd.Main(append(cli.DemoOptions(devParts), workercmd.WithName("worker"))...)
}
