package chaos

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// hop is a hand-made operation: a worker's op on key "k" over [call, ret]
// (ret < 0: no answer came).
type hop struct {
	worker    string
	call, ret int64
	op        Op
}

func history(ops ...hop) []porcupine.Operation {
	var out []porcupine.Operation
	ids := map[string]int{}
	for _, h := range ops {
		id, ok := ids[h.worker]
		if !ok {
			id = len(ids)
			ids[h.worker] = id
		}
		if h.op.Key == "" {
			h.op.Key = "k"
		}
		ret := h.ret
		if ret < 0 {
			ret = math.MaxInt64
			h.op.Out.Unknown = true
		}
		out = append(out, porcupine.Operation{ClientId: id, Input: h.op, Output: h.op.Out, Call: h.call, Return: ret,
			Metadata: Meta{Worker: h.worker}})
	}
	return out
}

func acquired(f uint64) Op { return Op{Kind: OpClaim, Out: OpOutput{Code: ClaimAcquired, Fence: f}} }
func takeover(f, prev uint64) Op {
	return Op{Kind: OpClaim, Out: OpOutput{Code: ClaimTakeover, Fence: f, Prev: prev}}
}
func held() Op { return Op{Kind: OpClaim, Out: OpOutput{Code: ClaimHeld}} }
func duplicate(f uint64, result string) Op {
	return Op{Kind: OpClaim, Out: OpOutput{Code: ClaimDuplicate, Fence: f, State: 3, Result: result}}
}
func commit(f uint64, result string, code int64) Op {
	return Op{Kind: OpCommit, Fence: f, State: 3, Result: result, Out: OpOutput{Code: code}}
}
func release(f uint64, code int64) Op {
	return Op{Kind: OpRelease, Fence: f, Out: OpOutput{Code: code}}
}
func write(f uint64, code int64) Op { return Op{Kind: OpWrite, Fence: f, Out: OpOutput{Code: code}} }

// TestRecordModelRejectsIllegalHistories: each history breaks one rule of
// the record, and the checker must say so.
func TestRecordModelRejectsIllegalHistories(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ops  []hop
	}{
		{"two commits succeed", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 5, 6, takeover(11, 10)},
			{"w1", 7, 8, commit(10, "a", CommitWritten)},
			{"w2", 9, 10, commit(11, "b", CommitWritten)},
		}},
		{"fence goes back", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 5, 6, takeover(9, 10)},
		}},
		{"fence repeats", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, release(10, CommitWritten)},
			{"w2", 5, 6, acquired(10)},
		}},
		{"stale fence commits", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 5, 6, takeover(11, 10)},
			{"w1", 7, 8, commit(10, "a", CommitWritten)},
		}},
		{"stale fence writes after a newer write", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 5, 6, takeover(11, 10)},
			{"w2", 7, 8, write(11, WriteApplied)},
			{"w1", 9, 10, write(10, WriteApplied)},
		}},
		{"write with a fence never granted", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, write(12, WriteApplied)},
		}},
		{"current fence refused", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, write(10, WriteRefused)},
		}},
		{"duplicate replays another result", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, commit(10, "a", CommitWritten)},
			{"w2", 4, 5, duplicate(10, "b")},
		}},
		{"duplicate replays another fence", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, commit(10, "a", CommitWritten)},
			{"w2", 4, 5, duplicate(9, "a")},
		}},
		{"duplicate before any commit", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 2, 3, duplicate(10, "a")},
			{"w1", 4, 5, commit(10, "a", CommitWritten)},
		}},
		{"finished key runs again", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, commit(10, "a", CommitWritten)},
			{"w2", 4, 5, acquired(11)},
		}},
		{"finished key answers held", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, commit(10, "a", CommitWritten)},
			{"w2", 4, 5, held()},
		}},
		{"a key without a record answers full", []hop{
			{"w1", 0, 1, Op{Kind: OpClaim, Out: OpOutput{Code: ClaimFull}}},
		}},
		{"takeover names a fence that is not the newest", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 2, 3, takeover(11, 10)},
			{"w3", 4, 5, takeover(12, 10)},
		}},
		{"released attempt commits", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, release(10, CommitWritten)},
			{"w1", 4, 5, commit(10, "a", CommitWritten)},
		}},
		{"ambiguous takeover does not excuse a later stale commit", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 2, -1, Op{Kind: OpClaim}},
			{"w3", 4, 5, takeover(12, 11)},
			{"w1", 6, 7, commit(10, "a", CommitWritten)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if porcupine.CheckOperations(RecordModel(), history(tc.ops...)) {
				t.Fatal("the checker accepted an illegal history")
			}
		})
	}
}

// TestRecordModelAcceptsLegalHistories: histories the system may produce,
// ambiguous operations included, are linearizable.
func TestRecordModelAcceptsLegalHistories(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ops  []hop
	}{
		{"short calls answer full, their full calls run and commit", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, release(10, CommitWritten)},
			{"w2", 4, 5, Op{Kind: OpClaim, Out: OpOutput{Code: ClaimFull}}},
			{"w2", 6, 7, acquired(11)},
			{"w1", 8, 9, commit(10, "a", CommitFull)},
			{"w1", 10, 11, commit(10, "a", CommitLost)},
			{"w2", 12, 13, commit(11, "b", CommitFull)},
			{"w2", 14, 15, commit(11, "b", CommitWritten)},
		}},
		{"claim, write, commit, duplicate", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 1, 2, held()},
			{"w1", 2, 3, write(10, WriteApplied)},
			{"w1", 4, 5, commit(10, "a", CommitWritten)},
			{"w2", 6, 7, duplicate(10, "a")},
		}},
		{"takeover: the zombie's commit is lost, its late write refused", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 5, 6, takeover(11, 10)},
			{"w2", 7, 8, write(11, WriteApplied)},
			{"w1", 9, 10, write(10, WriteRefused)},
			{"w1", 11, 12, commit(10, "a", CommitLost)},
			{"w2", 13, 14, commit(11, "b", CommitWritten)},
			{"w1", 15, 16, duplicate(11, "b")},
		}},
		{"the zombie writes before the new owner: both applied, the newer later", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 5, 6, takeover(11, 10)},
			{"w1", 7, 8, write(10, WriteApplied)},
			{"w2", 9, 10, write(11, WriteApplied)},
			{"w2", 11, 12, commit(11, "b", CommitWritten)},
		}},
		{"concurrent claims ordered by the checker", []hop{
			{"w1", 0, 10, takeover(11, 10)},
			{"w2", 1, 2, acquired(10)},
		}},
		{"commit without an answer that took effect", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, -1, commit(10, "a", 0)},
			{"w2", 4, 5, duplicate(10, "a")},
		}},
		{"commit without an answer that did not", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, -1, commit(10, "a", 0)},
			{"w2", 4, 5, takeover(11, 10)},
			{"w2", 6, 7, commit(11, "b", CommitWritten)},
		}},
		{"a resent commit answers written again", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, -1, commit(10, "a", 0)},
			{"w1", 4, 5, commit(10, "a", CommitWritten)},
		}},
		{"claim without an answer took a fence the next takeover replaces", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w2", 2, -1, Op{Kind: OpClaim}},
			{"w3", 4, 5, takeover(12, 11)},
			{"w3", 6, 7, commit(12, "c", CommitWritten)},
		}},
		{"write without an answer", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, -1, write(10, 0)},
			{"w2", 4, 5, takeover(11, 10)},
			{"w2", 6, 7, write(11, WriteApplied)},
		}},
		{"lease expired: commit lost, then a takeover commits", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, commit(10, "a", CommitLost)},
			{"w2", 4, 5, takeover(11, 10)},
			{"w2", 6, 7, commit(11, "b", CommitWritten)},
		}},
		{"release, then a new claim", []hop{
			{"w1", 0, 1, acquired(10)},
			{"w1", 2, 3, release(10, CommitWritten)},
			{"w1", 3, 4, release(10, CommitWritten)},
			{"w2", 4, 5, acquired(11)},
			{"w2", 6, 7, commit(11, "b", CommitWritten)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !porcupine.CheckOperations(RecordModel(), history(tc.ops...)) {
				t.Fatal("the checker rejected a legal history")
			}
		})
	}
}

// TestCheckHistoryNamesTheOffender: an illegal history is reported with the
// offending key's operations and a visualisation file.
func TestCheckHistoryNamesTheOffender(t *testing.T) {
	t.Parallel()
	ops := history(
		hop{"w1", 0, 1, acquired(10)},
		hop{"w2", 5, 6, takeover(11, 10)},
		hop{"w1", 7, 8, commit(10, "a", CommitWritten)},
		hop{"w1", 0, 1, Op{Key: "fine", Kind: OpClaim, Out: OpOutput{Code: ClaimAcquired, Fence: 3}}},
	)
	v, err := CheckHistory(ops, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != porcupine.Illegal || len(v.Offending) != 1 || v.Visualization == "" || v.Keys != 2 {
		t.Fatalf("verdict %+v, want Illegal naming key k alone, with a visualisation", v)
	}
}
