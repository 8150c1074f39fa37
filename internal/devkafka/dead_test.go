package devkafka

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestMemberDead checks the eviction rule by group state: in a stable group
// a member silent for its session timeout once the group has been stable
// that long; in a rebalancing group one silent for twice its session timeout
// (kfake has removed any live member silent that long by itself); never in
// other states, nor without a known session timeout.
func TestMemberDead(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	m := func(silent time.Duration) member { return member{last: ago(silent), session: time.Second} }
	for _, tc := range []struct {
		name   string
		m      member
		state  string
		stable time.Duration // how long the group has been stable
		want   bool
	}{
		{"stable, silent past its session", m(1500 * time.Millisecond), "Stable", 2 * time.Second, true},
		{"stable, heard from within its session", m(500 * time.Millisecond), "Stable", 2 * time.Second, false},
		{"stable only just now", m(5 * time.Second), "Stable", 500 * time.Millisecond, false},
		{"rebalancing, silent past twice its session", m(2500 * time.Millisecond), "PreparingRebalance", 0, true},
		{"rebalancing, silent past its session only", m(1500 * time.Millisecond), "PreparingRebalance", 0, false},
		{"completing a rebalance (kfake's sync timer acts)", m(time.Minute), "CompletingRebalance", 0, false},
		{"empty group", m(time.Minute), "Empty", 0, false},
		{"no session timeout seen", member{last: ago(time.Minute)}, "PreparingRebalance", 0, false},
	} {
		if got := tc.m.dead(tc.state, ago(tc.stable), now); got != tc.want {
			t.Errorf("%s: dead = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStragglers checks the overdue-rebalance rule: once a rebalance that
// began after start has run past 1.5 times the longest rebalance timeout
// among the members, those that sent no JoinGroup since start are
// stragglers; none before that, and none when no timeout is known.
func TestStragglers(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	seen := map[string]member{
		"rejoined":   {joined: ago(time.Second), rebalance: 4 * time.Second},
		"old":        {joined: ago(time.Minute), rebalance: 2 * time.Second},
		"unrecorded": {},
	}
	all := []string{"rejoined", "old", "unrecorded"}
	for _, tc := range []struct {
		name  string
		ids   []string
		start time.Duration // how long ago the rebalance began, at most
		want  []string
	}{
		{"overdue: the longest timeout (4s) times 1.5 has passed", all, 7 * time.Second, []string{"old", "unrecorded"}},
		{"not yet: 6s is not past 1.5 times 4s", all, 6 * time.Second, nil},
		{"only the shorter timeout known, and passed", []string{"old"}, 4 * time.Second, []string{"old"}},
		{"no timeout known", []string{"unrecorded"}, time.Hour, nil},
		{"everyone rejoined", []string{"rejoined"}, time.Minute, nil},
	} {
		got := stragglers(tc.ids, seen, ago(tc.start), now)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: stragglers = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestJudgeOneLeave checks that a sweep which finds, in one rebalancing
// group, a dead member and a straggler makes both leave in one LeaveGroup,
// each with its reason, and keeps the member that rejoined: two requests
// would let the first end the rebalance, and kfake would answer the second
// with UNKNOWN_MEMBER_ID.
func TestJudgeOneLeave(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	r := &Reaper{
		seen: map[memberKey]member{
			{"g", "silent"}:    {last: ago(5 * time.Second), joined: ago(time.Minute), session: time.Second, rebalance: 2 * time.Second},
			{"g", "straggler"}: {last: ago(time.Second), joined: ago(time.Minute), session: 10 * time.Second, rebalance: 2 * time.Second},
			{"g", "rejoined"}:  {last: now, joined: ago(time.Second), session: 10 * time.Second, rebalance: 2 * time.Second},
		},
		stable:    map[string]time.Time{},
		preparing: map[string]time.Time{},
		swept:     ago(10 * time.Second), // the rebalance began after it: overdue past 3 s
	}
	g := kadm.DescribedGroup{Group: "g", State: "PreparingRebalance", Members: []kadm.DescribedGroupMember{
		{MemberID: "silent"}, {MemberID: "straggler"}, {MemberID: "rejoined"},
	}}
	got := r.judge(g, now)
	want := []leave{{"silent", reasonSilent}, {"straggler", reasonNotRejoined}}
	if !slices.Equal(got, want) {
		t.Fatalf("judge = %v, want %v", got, want)
	}
	if r.preparing["g"] != r.swept {
		t.Errorf("the rebalance is dated %v, want the last sweep's start %v", r.preparing["g"], r.swept)
	}
}
