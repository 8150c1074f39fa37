// Package benchkit holds what the benchmark programs under bench/ share: a
// private redis-server on a free port (redis.go), a random key prefix
// (prefix.go), parallel loops that stop at the first error (parallel.go),
// median and percentile of measured durations (stats.go), a span processor
// that times the lease renewer's rounds (rounds.go), a claim-and-complete
// pass over an idempotency Store (idempotency.go), and the printing of
// figures, one `name=value unit` line each (figures.go).
package benchkit
