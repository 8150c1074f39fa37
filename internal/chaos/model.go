package chaos

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// OpKind is the kind of an operation on one idempotency key's record.
type OpKind int

const (
	// OpClaim is a claim of the key (idem_claim.lua, one entry).
	OpClaim OpKind = iota + 1
	// OpCommit is a fenced commit of an attempt's outcome, COMPLETED or
	// FAILED (idem_complete.lua, or one entry of idem_complete_batch.lua).
	OpCommit
	// OpRelease ends an attempt without an outcome (idem_release.lua).
	OpRelease
	// OpWrite is the fenced downstream write of an attempt (the PostgreSQL
	// fence guard of demo.transfer).
	OpWrite
)

func (k OpKind) String() string {
	switch k {
	case OpClaim:
		return "claim"
	case OpCommit:
		return "commit"
	case OpRelease:
		return "release"
	case OpWrite:
		return "write"
	}
	return fmt.Sprintf("op(%d)", int(k))
}

// Claim outcomes, as idem_claim.lua answers them.
const (
	ClaimAcquired  = 1
	ClaimTakeover  = 2
	ClaimHeld      = 3
	ClaimDuplicate = 4
	ClaimMismatch  = 5
	ClaimWindow    = 6
	ClaimCorrupt   = 7
	ClaimFull      = 8 // a short call's entry found a record: claimed again in a full call
)

// Commit and release answers (idem_complete.lua, idem_release.lua).
const (
	CommitWritten = 1
	CommitLost    = -1
	CommitWindow  = -2
	CommitOther   = -3
	CommitFull    = -4 // a short call's entry: sent again in a full call
)

// Write answers.
const (
	WriteApplied = 1
	WriteRefused = 0
)

// Op is one operation on a key's record: what was asked (Kind, Fence,
// State, Result) and what was answered (Out).
type Op struct {
	Kind   OpKind
	Key    string
	Fence  uint64 // commit, release, write: the caller's fence
	State  int    // commit: 3 completed, 4 failed
	Result string // commit: the result (or the terminal error)
	Out    OpOutput
}

// OpOutput is the answer to an operation.
type OpOutput struct {
	// Unknown: no answer came back (a reply lost, a connection cut): the
	// operation may or may not have taken effect.
	Unknown bool
	// Code is the claim outcome (Claim*), the commit or release answer
	// (Commit*), or the write's (Write*).
	Code int64
	// Fence is a claim's granted fence (acquired, takeover) or the fence
	// of the record a duplicate replays.
	Fence uint64
	// Prev is a takeover's previous fence.
	Prev uint64
	// State and Result are what a duplicate replays: the record's state (3
	// completed, 4 failed) and result.
	State  int
	Result string
}

// recordState is the model's state of one key: the sequential
// specification of the record state machine (docs: absent -> PROCESSING ->
// COMPLETED/FAILED or released), plus the newest fence the downstream
// guard applied.
type recordState struct {
	fence     uint64 // newest fence granted by a claim
	maybeNew  bool   // a claim without an answer may have granted a newer, unknown fence
	holder    uint64 // the fence whose attempt holds the record (0: none)
	released  uint64 // the fence that last released it
	done      bool
	doneFence uint64
	doneState int
	result    string
	written   uint64 // newest fence the downstream guard applied
}

// RecordModel is the porcupine model of one idempotency key's record,
// partitioned by key. Its rules:
//
//   - a claim that runs the job (acquired, takeover) is given a fence
//     strictly greater than every fence granted before for the key, and a
//     takeover names the newest of them as the one it replaces;
//   - a finished record is never run again: its claims answer duplicate,
//     replaying exactly the stored state and result;
//   - a commit succeeds only for the newest fence while it holds the
//     record, so at most one commit per key succeeds (a resend of that very
//     commit answers written again, writing nothing);
//   - a release succeeds only for the holder;
//   - a downstream write is applied only when its fence is not older than
//     the newest applied, and refused only when it is: a stale fence never
//     writes; and no write carries a fence never granted.
//
// Lease expiry is not modelled: any commit or release may answer lost, and a
// claim may answer held while the record is unfinished. An operation without
// an answer (Out.Unknown) may have taken effect or not.
func RecordModel() porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{recordState{}} },
		Step: func(state, input, output any) []any {
			return step(state.(recordState), input.(Op), output.(OpOutput))
		},
		DescribeOperation: func(input, output any) string { return describeOp(input.(Op), output.(OpOutput)) },
		DescribeState: func(state any) string {
			s := state.(recordState)
			return fmt.Sprintf("fence=%d maybe_new=%t holder=%d done=%t done_fence=%d written=%d",
				s.fence, s.maybeNew, s.holder, s.done, s.doneFence, s.written)
		},
	}
	return m.ToModel()
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range history {
		k := op.Input.(Op).Key
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// step returns the states the record can be in after op answered out, none
// when that answer is impossible.
func step(s recordState, op Op, out OpOutput) []any {
	var effect func() (recordState, bool) // the state after op took effect, if it may
	var answered func() (recordState, bool)
	switch op.Kind {
	case OpClaim:
		effect = func() (recordState, bool) {
			if s.done {
				return s, false
			}
			n := s
			n.maybeNew, n.holder = true, 0
			return n, true
		}
		answered = func() (recordState, bool) { return claimStep(s, out) }
	case OpCommit:
		effect = func() (recordState, bool) { return commitStep(s, op, CommitWritten) }
		answered = func() (recordState, bool) { return commitStep(s, op, out.Code) }
	case OpRelease:
		effect = func() (recordState, bool) { return releaseStep(s, op, CommitWritten) }
		answered = func() (recordState, bool) { return releaseStep(s, op, out.Code) }
	case OpWrite:
		effect = func() (recordState, bool) { return writeStep(s, op, WriteApplied) }
		answered = func() (recordState, bool) { return writeStep(s, op, out.Code) }
	default:
		return nil
	}
	if out.Unknown {
		states := []any{s}
		if n, ok := effect(); ok {
			states = append(states, n)
		}
		return states
	}
	if n, ok := answered(); ok {
		return []any{n}
	}
	return nil
}

func claimStep(s recordState, out OpOutput) (recordState, bool) {
	switch out.Code {
	case ClaimAcquired, ClaimTakeover:
		if s.done || out.Fence <= s.fence {
			return s, false
		}
		if out.Code == ClaimTakeover && !s.maybeNew && out.Prev != s.fence {
			return s, false
		}
		s.fence, s.maybeNew, s.holder = out.Fence, false, out.Fence
		return s, true
	case ClaimHeld:
		return s, !s.done
	case ClaimDuplicate:
		return s, s.done && out.Fence == s.doneFence && out.State == s.doneState && out.Result == s.result
	case ClaimMismatch:
		return s, s.done
	case ClaimWindow:
		return s, true
	case ClaimFull:
		// Nothing written; answered only where a record exists.
		return s, s.fence > 0 || s.maybeNew || s.done
	}
	return s, false
}

func commitStep(s recordState, op Op, code int64) (recordState, bool) {
	mine := s.done && s.doneFence == op.Fence
	same := mine && s.doneState == op.State && s.result == op.Result
	switch code {
	case CommitWritten:
		if s.done {
			return s, same
		}
		if s.maybeNew || s.holder != op.Fence || s.fence != op.Fence {
			return s, false
		}
		s.done, s.doneFence, s.doneState, s.result, s.holder = true, op.Fence, op.State, op.Result, 0
		return s, true
	case CommitLost:
		return s, !mine
	case CommitOther:
		return s, mine && !same
	case CommitWindow, CommitFull:
		return s, true
	}
	return s, false
}

func releaseStep(s recordState, op Op, code int64) (recordState, bool) {
	switch code {
	case CommitWritten:
		if !s.done && !s.maybeNew && s.holder == op.Fence && s.fence == op.Fence {
			s.holder, s.released = 0, op.Fence
			return s, true
		}
		// A resend of this release, the record untouched since.
		return s, !s.done && !s.maybeNew && s.holder == 0 && s.released == op.Fence && s.fence == op.Fence
	case CommitLost:
		return s, true
	}
	return s, false
}

func writeStep(s recordState, op Op, code int64) (recordState, bool) {
	if op.Fence > s.fence && !s.maybeNew {
		return s, false // a fence never granted
	}
	switch code {
	case WriteApplied:
		if op.Fence < s.written {
			return s, false
		}
		s.written = op.Fence
		return s, true
	case WriteRefused:
		return s, op.Fence < s.written
	}
	return s, false
}

func describeOp(op Op, out OpOutput) string {
	ans := "?"
	if !out.Unknown {
		switch op.Kind {
		case OpClaim:
			ans = fmt.Sprintf("code=%d fence=%d prev=%d", out.Code, out.Fence, out.Prev)
			if out.Code == ClaimDuplicate {
				ans = fmt.Sprintf("duplicate fence=%d state=%d result=%q", out.Fence, out.State, out.Result)
			}
		default:
			ans = fmt.Sprintf("%d", out.Code)
		}
	}
	switch op.Kind {
	case OpClaim:
		return fmt.Sprintf("claim(%s) -> %s", op.Key, ans)
	case OpCommit:
		return fmt.Sprintf("commit(%s, fence=%d, state=%d, %q) -> %s", op.Key, op.Fence, op.State, op.Result, ans)
	}
	return fmt.Sprintf("%s(%s, fence=%d) -> %s", op.Kind, op.Key, op.Fence, ans)
}
