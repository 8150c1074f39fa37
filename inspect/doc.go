// Package inspect is the operator layer of leasehold: one [Inspector] reads
// and acts on what the workers keep in Redis (idempotency records, leases,
// heartbeat details, saga journals, dead-lettered compensations, and each
// key's attempt history), for the `worker` CLI, the web console and the
// Worker's operator methods alike, so that no operator action has a second
// implementation.
//
// An Inspector holds no lease and runs no job; it is safe for concurrent use
// and touches Redis only when a method is called.
package inspect
