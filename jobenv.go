package leasehold

import "github.com/leasehold/leasehold/internal/jobenv"

// A Job built over a jobenv.Env runs its handler's effects outside a worker:
// package leaseholdtest builds such jobs for handlers' unit tests through
// jobenv.NewJob, so the root package exports no constructor for them.
func init() {
	jobenv.NewJob = func(s jobenv.Spec) any {
		return &Job{
			Key: s.Key, Type: s.Type, Payload: s.Payload, Headers: s.Headers,
			Attempt: s.Attempt, Takeover: s.Takeover,
			fence: s.Fence, last: s.Last, ctx: s.Ctx, env: s.Env,
		}
	}
}
