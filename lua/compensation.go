package lua

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
)
