package scripts_test

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/scripts"
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
		{"fence_prelude.lua", []int{scripts.StatusLost}, nil},
		{"lease_acquire.lua", []int{scripts.LeaseOK, scripts.LeaseOtherOwner}, nil},
		{"lease_release.lua", []int{scripts.LeaseNoOwner, scripts.LeaseOK, scripts.LeaseOtherOwner}, nil},
		{"lease_cancel.lua", []int{scripts.LeaseNoOwner, scripts.LeaseCancelStored, scripts.LeaseOtherOwner}, nil},
		{"lease_expire.lua", []int{scripts.LeaseNoOwner, scripts.LeaseOK}, nil},
		{"dlq_stamp.lua", []int{scripts.DLQStamped, scripts.DLQDone}, nil},
		{"idem_claim.lua", []int{scripts.IdemAcquired, scripts.IdemTakeover, scripts.IdemHeld, scripts.IdemDuplicate,
			scripts.IdemMismatch, scripts.IdemSkew, scripts.IdemCorrupt, scripts.IdemClaimFull}, []int{scripts.IdemAcquired, scripts.IdemTakeover}},
		{"idem_complete.lua", []int{scripts.IdemOK, scripts.StatusLost, scripts.IdemWindowSkew, scripts.IdemOtherOutcome}, nil},
		{"idem_complete_batch.lua", []int{scripts.IdemOK, scripts.StatusLost, scripts.IdemWindowSkew, scripts.IdemOtherOutcome,
			scripts.IdemCompleteFull}, nil},
		{"idem_release.lua", []int{scripts.IdemOK, scripts.StatusLost, scripts.IdemWindowSkew}, nil},
		{"idem_details.lua", []int{scripts.IdemOK}, nil},
		{"idem_reset.lua", []int{scripts.IdemResetDone, scripts.IdemResetHeld, scripts.IdemResetClock}, nil},
		{"idem_history.lua", []int{scripts.IdemHistoryOK}, nil},
		{"redlock_acquire.lua", []int{scripts.RedlockTaken, scripts.RedlockLocked, scripts.RedlockQuarantined}, nil},
		{"comp_intent.lua", []int{scripts.CompIntentNotOpen, scripts.CompIntentTooMany}, nil},
		{"comp_done.lua", []int{scripts.CompDoneMarked, scripts.CompDoneLate, scripts.CompDoneNoStep, scripts.CompDoneNoJournal,
			scripts.CompDoneOtherToken}, nil},
		{"comp_seal.lua", []int{scripts.CompSealNoJournal, scripts.CompSealed, scripts.CompSealNotOpen}, nil},
		{"comp_close.lua", []int{scripts.CompCloseNoJournal, scripts.CompClosed, scripts.CompCloseBegun, scripts.CompCloseOtherToken}, nil},
		{"comp_begin.lua", []int{scripts.CompBeginAbsent, scripts.CompBeginStarted, scripts.CompBeginDone, scripts.CompBeginCommitted,
			scripts.CompBeginDead, scripts.CompBeginAlive, scripts.CompBeginSealed}, nil},
		{"comp_claim.lua", []int{scripts.CompClaimed, scripts.CompClaimDone, scripts.CompClaimDead, scripts.CompClaimIdle,
			scripts.CompClaimNoStep}, nil},
		{"comp_finish.lua", []int{scripts.CompFinishSuperseded, scripts.CompFinishRecorded}, nil},
		{"comp_absent.lua", []int{scripts.CompAbsentExists, scripts.CompAbsentGone, scripts.CompAbsentPending}, nil},
		{"limit_acquire.lua", []int{scripts.LimitAcquired, scripts.LimitFull, scripts.LimitHeld, scripts.LimitRated}, nil},
		{"limit_prune.lua", nil, nil}, // a count of groups removed, no status code
		{"comp_settle.lua", []int{scripts.CompSettlePending, scripts.CompSettleDone, scripts.CompSettleDead, scripts.CompSettleIdle}, nil},
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
