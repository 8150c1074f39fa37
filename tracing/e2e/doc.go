// Package e2e holds the end-to-end tracing test: `worker run`, `worker
// enqueue`, `worker expire` and `worker dev-broker` as subprocesses, a
// redis-server, PostgreSQL and the payment stub for demo.transfer, and a
// Jaeger v2 binary (JAEGER_BIN, else built by tools/jaeger/build.sh) whose
// query API the test reads the traces from. It has no non-test code.
package e2e
