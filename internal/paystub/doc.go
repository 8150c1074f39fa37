// Package paystub is a small local HTTP "payment provider" for the demo and
// the chaos tests: it records every charge and refund it receives, so that the
// effects of exactly-once-in-effect jobs can be counted from outside the
// worker (`worker payment-stub` serves it).
//
// The API mimics a real provider's idempotency rules:
//
//	POST /charges  {"id": "...", "account": "...", "amount": 10}
//	    201 applied; 200 when a charge with this id exists (not charged again)
//	POST /refunds  {"charge_id": "..."}
//	    201 applied; 200 when the charge was already refunded (not refunded
//	    again); 404 when no such charge exists
//	GET  /ledger   every charge, and counters of requests received and applied
//
// A charge is never fenced: the provider knows nothing of leases. That is why
// a demo job's charge is a saga step whose compensation refunds it.
package paystub
