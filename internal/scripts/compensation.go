package scripts

// Scripts of the compensation journal (package compensation). The journal of
// one (lease name, fence) is a hash beside the job's lease key, in the same
// Cluster slot; see each file's header for KEYS, ARGV and return codes.
var (
	// CompIntent journals a step's intent before its effect (fenced by the job lease).
	CompIntent = Fenced("comp_intent.lua")
	// CompDone marks a step done after its effect, reopening it when its
	// compensation had already begun.
	CompDone = Plain("comp_done.lua")
	// CompSeal marks a journal sealed before the job's fenced commit (fenced by the job lease).
	CompSeal = Fenced("comp_seal.lua")
	// CompClose marks a journal committed after the job's commit landed.
	CompClose = Plain("comp_close.lua")
	// CompBegin starts compensating a journal (fenced by its compensation lease).
	CompBegin = Fenced("comp_begin.lua")
	// CompClaim claims a step for one compensation attempt (fenced by the compensation lease).
	CompClaim = Fenced("comp_claim.lua")
	// CompFinish records an attempt's outcome (fenced by the compensation lease).
	CompFinish = Fenced("comp_finish.lua")
	// CompSettle ends a compensation pass (fenced by the compensation lease).
	CompSettle = Fenced("comp_settle.lua")
	// CompAbsent tells the recovery sweep whether a journal it read as
	// absent is gone for good, so that its index entry can be dropped.
	CompAbsent = Plain("comp_absent.lua")
)

// Status codes of CompIntent: on success the step's number n >= 1; or
// StatusLost, or one of these.
const (
	// CompIntentNotOpen: the journal no longer takes steps (its compensation
	// or commit began); nothing was written.
	CompIntentNotOpen = -2
	// CompIntentTooMany: the journal holds the maximum number of steps.
	CompIntentTooMany = -3
)

// Status codes of CompDone.
const (
	// CompDoneMarked: the step is marked done.
	CompDoneMarked = 1
	// CompDoneLate: compensation of the step had begun while it was in
	// doubt; the step is reopened with the next generation.
	CompDoneLate = 2
	// CompDoneNoStep: the journal has no such step.
	CompDoneNoStep = -3
	// CompDoneNoJournal: there is no journal.
	CompDoneNoJournal = -4
	// CompDoneOtherToken: the journal belongs to another owner token.
	CompDoneOtherToken = -5
)

// Status codes of CompSeal (besides StatusLost).
const (
	// CompSealNoJournal: there is no journal (the job took no step).
	CompSealNoJournal = 0
	// CompSealed: the journal is sealed (now or already).
	CompSealed = 1
	// CompSealNotOpen: compensation of the journal began.
	CompSealNotOpen = -2
)

// Status codes of CompClose.
const (
	// CompCloseNoJournal: there is no journal.
	CompCloseNoJournal = 0
	// CompClosed: the journal is marked committed.
	CompClosed = 1
	// CompCloseBegun: compensation of the journal began.
	CompCloseBegun = -2
	// CompCloseOtherToken: the journal belongs to another owner token.
	CompCloseOtherToken = -5
)

// Status codes of CompBegin (first element of its reply, besides
// StatusLost).
const (
	// CompBeginAbsent: there is no journal.
	CompBeginAbsent = 0
	// CompBeginStarted: the caller now compensates the journal.
	CompBeginStarted = 1
	// CompBeginDone: the journal is compensated already.
	CompBeginDone = 2
	// CompBeginCommitted: the journal's commit landed; it is never compensated.
	CompBeginCommitted = 3
	// CompBeginDead: the journal is dead-lettered (mode retry revives it).
	CompBeginDead = 4
	// CompBeginAlive: the job's owner still holds its lease (mode sweep).
	CompBeginAlive = 5
	// CompBeginSealed: the journal is sealed, its commit may have landed (mode sweep).
	CompBeginSealed = 6
)

// Status codes of CompClaim (first element of its reply, besides
// StatusLost).
const (
	// CompClaimed: the step is claimed for an attempt; the reply carries it.
	CompClaimed = 1
	// CompClaimDone: the step is compensated already.
	CompClaimDone = 2
	// CompClaimDead: the step is dead-lettered.
	CompClaimDead = 4
	// CompClaimIdle: the journal is not being compensated.
	CompClaimIdle = -2
	// CompClaimNoStep: the journal has no such step.
	CompClaimNoStep = -3
)

// Attempt outcomes passed to CompFinish (its ARGV[4]).
const (
	// CompAttemptCompensated: the handler succeeded.
	CompAttemptCompensated = 1
	// CompAttemptRetry: the handler failed and will be tried again.
	CompAttemptRetry = 2
	// CompAttemptDead: the handler failed on its last attempt.
	CompAttemptDead = 3
)

// Status codes of CompFinish (besides StatusLost).
const (
	// CompFinishSuperseded: the claim is no longer the caller's (a late
	// effect reopened the step); nothing was written.
	CompFinishSuperseded = 0
	// CompFinishRecorded: the attempt's outcome is recorded.
	CompFinishRecorded = 1
)

// Status codes of CompSettle (first element of its reply, besides
// StatusLost).
const (
	// CompSettlePending: steps are still pending: run another pass.
	CompSettlePending = 1
	// CompSettleDone: every step is compensated.
	CompSettleDone = 2
	// CompSettleDead: a step is dead-lettered; the journal is kept without expiry.
	CompSettleDead = 3
	// CompSettleIdle: the journal is not being compensated.
	CompSettleIdle = -2
)

// Status codes of CompAbsent.
const (
	// CompAbsentExists: the journal exists (it was created meanwhile).
	CompAbsentExists = 0
	// CompAbsentGone: there is no journal and the job lease is not held under
	// its fence, so none can be created any more.
	CompAbsentGone = 1
	// CompAbsentPending: there is no journal yet, but the job lease is held
	// under its fence: the owner's first intent may still create it.
	CompAbsentPending = 2
)
