// Package cli implements the worker command line: run (the worker), the
// operator commands (inspect, leases, expire, reset, dlq, capacity,
// compensations, ui), enqueue, dev-broker and version. A program adds its
// job types, compensation handlers, flags and commands with [Option]s
// ([Register], [RegisterCompensations], [WithFlags], [WithCommand]) and runs
// the command line with [Run]; package workercmd is its public face, and
// cmd/worker is one such program, with [DemoOptions] (the demo's job types
// and the commands demo and payment-stub). [Main] runs cmd/worker's.
//
// Every command takes its settings from flags, with environment variables as
// defaults (LEASEHOLD_BROKERS, REDIS_URL, ...), each flag defined once with
// its name, variable, default and usage (flagspec.go): the help's
// "(env NAME)" and docs/flags.md (`go run ./gendocs`) come from there.
// Commands print failures as one line on stderr, and exit 1 on failure and 2
// on bad usage. They are meant to be run as separate processes too:
// `worker dev-broker` and `worker payment-stub` print one "... listening on
// ADDR" line on stdout once they serve.
package cli
