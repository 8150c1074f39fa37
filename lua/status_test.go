package lua_test

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/lua"
)

// literalReturn matches a status code a script returns as a literal: `return
// 2` or `return {2, ...}`.
var literalReturn = regexp.MustCompile(`(?m)^\s*return\s+\{?\s*(-?\d+)\b`)

// TestStatusCodes checks that each script returns exactly the status codes
// that lua names for it: every literal code it returns is a named constant,
// and every named constant is returned, literally or (computed) through a
// variable.
func TestStatusCodes(t *testing.T) {
	for _, c := range []struct {
		file     string
		named    []int
		computed []int // returned through a variable, not as a literal
	}{
		{"fence_prelude.lua", []int{lua.StatusLost}, nil},
		{"lease_acquire.lua", []int{lua.LeaseOK, lua.LeaseOtherOwner}, nil},
		{"lease_release.lua", []int{lua.LeaseNoOwner, lua.LeaseOK, lua.LeaseOtherOwner}, nil},
		{"dlq_stamp.lua", []int{lua.DLQStamped, lua.DLQDone}, nil},
		{"idem_claim.lua", []int{lua.IdemAcquired, lua.IdemTakeover, lua.IdemHeld, lua.IdemDuplicate,
			lua.IdemMismatch, lua.IdemSkew, lua.IdemCorrupt}, []int{lua.IdemAcquired, lua.IdemTakeover}},
		{"idem_complete.lua", []int{lua.IdemOK, lua.StatusLost, lua.IdemWindowSkew, lua.IdemOtherOutcome}, nil},
		{"idem_complete_batch.lua", []int{lua.IdemOK, lua.StatusLost, lua.IdemWindowSkew, lua.IdemOtherOutcome}, nil},
		{"idem_release.lua", []int{lua.IdemOK, lua.StatusLost}, nil},
		{"idem_details.lua", []int{lua.IdemOK}, nil},
		{"idem_reset.lua", []int{lua.IdemResetDone, lua.IdemResetHeld, lua.IdemResetClock}, nil},
		{"redlock_acquire.lua", []int{lua.RedlockTaken, lua.RedlockLocked, lua.RedlockQuarantined}, nil},
		{"comp_intent.lua", []int{lua.CompIntentNotOpen, lua.CompIntentTooMany}, nil},
		{"comp_done.lua", []int{lua.CompDoneMarked, lua.CompDoneLate, lua.CompDoneNoStep, lua.CompDoneNoJournal,
			lua.CompDoneOtherToken}, nil},
		{"comp_seal.lua", []int{lua.CompSealNoJournal, lua.CompSealed, lua.CompSealNotOpen}, nil},
		{"comp_close.lua", []int{lua.CompCloseNoJournal, lua.CompClosed, lua.CompCloseBegun, lua.CompCloseOtherToken}, nil},
		{"comp_begin.lua", []int{lua.CompBeginAbsent, lua.CompBeginStarted, lua.CompBeginDone, lua.CompBeginCommitted,
			lua.CompBeginDead, lua.CompBeginAlive, lua.CompBeginSealed}, nil},
		{"comp_claim.lua", []int{lua.CompClaimed, lua.CompClaimDone, lua.CompClaimDead, lua.CompClaimIdle,
			lua.CompClaimNoStep}, nil},
		{"comp_finish.lua", []int{lua.CompFinishSuperseded, lua.CompFinishRecorded}, nil},
		{"comp_settle.lua", []int{lua.CompSettlePending, lua.CompSettleDone, lua.CompSettleDead, lua.CompSettleIdle}, nil},
	} {
		src := file(t, c.file)
		var body []string
		for _, line := range strings.Split(src, "\n") {
			if !strings.HasPrefix(line, "--") {
				body = append(body, line)
			}
		}
		var got []int
		for _, m := range literalReturn.FindAllStringSubmatch(strings.Join(body, "\n"), -1) {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				t.Fatalf("%s: %v", c.file, err)
			}
			got = append(got, n)
		}
		got = append(got, c.computed...)
		if diff := cmp.Diff(set(c.named), set(got)); diff != "" {
			t.Errorf("%s: named status codes (-) vs codes the script returns (+):\n%s", c.file, diff)
		}
	}
}

func set(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
