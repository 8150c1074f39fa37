// Package cli implements the worker command: run (the worker), enqueue,
// inspect, leases, expire, dev-broker, payment-stub and demo (what `make run`
// starts). cmd/worker is a thin main over [Main].
//
// Every command takes its settings from flags, with environment variables as
// defaults (LEASEHOLD_BROKERS, REDIS_URL, ...), prints failures as one line
// on stderr, and exits 1 on failure and 2 on bad usage. The commands are
// meant to be run as separate processes too: `worker dev-broker` and
// `worker payment-stub` print one "... listening on ADDR" line on stdout once
// they serve.
package cli
