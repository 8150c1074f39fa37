// Package testkit starts the real servers that leasehold's tests run against,
// one file per concern: a redis-server per test on a free port that a test can
// stop, SIGKILL, SIGSTOP/SIGCONT and restart with or without its data, and a
// fresh key prefix on the shared Redis (redis.go); a Redis Cluster
// (cluster.go); a fresh PostgreSQL schema (postgres.go). A missing server
// fails the test; it is never skipped. Only `go test -short` (make
// test-short) skips the tests that need Kafka, Jaeger, a chaos run or a
// browser, through [SkipShort] (short.go).
package testkit
