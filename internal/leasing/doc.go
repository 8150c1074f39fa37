// Package leasing holds what the lease, idempotency and compensation
// packages and the worker share underneath their public API: the one family
// of lease errors and the one reading of go-redis errors ([Classify]).
package leasing
