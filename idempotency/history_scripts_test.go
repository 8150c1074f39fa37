package idempotency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/outcome"
)

// scriptCounter counts the EVALSHA calls of the idempotency scripts a client
// sends, alone and in pipelines (the lease Manager's renewals are not
// counted: their scripts are not in the list).
type scriptCounter struct {
	mu    sync.Mutex
	names map[string]string // SHA -> script
	calls map[string]int
}

func newScriptCounter() *scriptCounter {
	names := map[string]string{}
	for name, s := range map[string]*redis.Script{"claim": scripts.IdemClaim, "complete": scripts.IdemComplete,
		"complete_batch": scripts.IdemCompleteBatch, "history": scripts.IdemHistory, "release": scripts.IdemRelease} {
		names[s.Hash()] = name
	}
	return &scriptCounter{names: names, calls: map[string]int{}}
}

func (sc *scriptCounter) count(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 || cmd.Name() != "evalsha" {
		return
	}
	sha, _ := args[1].(string)
	if name, ok := sc.names[sha]; ok {
		sc.mu.Lock()
		sc.calls[name]++
		sc.mu.Unlock()
	}
}

func (sc *scriptCounter) snapshot() map[string]int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := make(map[string]int, len(sc.calls))
	for k, v := range sc.calls {
		out[k] = v
	}
	return out
}

func (sc *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (sc *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sc.count(cmd)
		return next(ctx, cmd)
	}
}
func (sc *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			sc.count(c)
		}
		return next(ctx, cmds)
	}
}

// setupCounted is setup over a client of its own whose idempotency script
// calls are counted.
func setupCounted(t *testing.T, opts []Opt) (*env, *scriptCounter) {
	t.Helper()
	shared, prefix := testkit.SharedRedis(t)
	c := redis.NewClient(shared.Options())
	t.Cleanup(func() { _ = c.Close() })
	sc := newScriptCounter()
	c.AddHook(sc)
	return setupOn(t, c, prefix, opts), sc
}

// TestHistoryWrittenByClaimAndComplete: with a history, a claim and its
// completion are exactly one claim script call and one complete script call
// (no idem_history.lua call), and the history reads back the attempt's start
// and end, fence, attempt, owner digest, worker and span. A second key
// failed for good ends as failed; a third, whose entry is not the last one
// when it completes, is found by the complete script's scan.
func TestHistoryWrittenByClaimAndComplete(t *testing.T) {
	t.Parallel()
	e, sc := setupCounted(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	const tid, sid = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	cs := e.s.ClaimBatch(ctx, []Request{{Key: "done", Fingerprint: fp("a"), Worker: "host/1", TraceID: tid, SpanID: sid}})
	c := cs[0]
	if c.Err != nil || c.Outcome != Acquired {
		t.Fatalf("claim: %+v", c)
	}
	token := leasing.Token(c.Lease)
	if err := e.s.Complete(ctx, c, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if got, want := sc.snapshot(), map[string]int{"claim": 1, "complete_batch": 1}; !equalCounts(got, want) {
		t.Fatalf("script calls %v, want %v", got, want)
	}
	hs, err := e.s.History(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 {
		t.Fatalf("history = %+v", hs)
	}
	a := hs[0]
	if a.Fence != c.Fence || a.Attempt != 1 || a.Worker != "host/1" || a.Owner != leasing.OwnerDigest(token) ||
		a.TraceID != tid || a.SpanID != sid || a.Started.IsZero() || a.Ended.Before(a.Started) ||
		a.End != string(outcome.Completed) || a.TakenOver {
		t.Fatalf("attempt = %+v (fence %d)", a, c.Fence)
	}

	f, _ := e.s.Claim(ctx, "failed", fp("b"))
	if err := e.s.Fail(ctx, f, Terminal, errors.New("no such account")); err != nil {
		t.Fatal(err)
	}
	hs, _ = e.s.History(ctx, "failed")
	if len(hs) != 1 || hs[0].End != string(outcome.Failed) || hs[0].Fence != f.Fence {
		t.Fatalf("failed key's history = %+v", hs)
	}

	// A result too large for the bucket lives in its own key; the record
	// still carries the entry, ended.
	big := strings.Repeat("r", 4*e.s.inline)
	b, _ := e.s.Claim(ctx, "big", fp("d"))
	if err := e.s.Complete(ctx, b, []byte(big)); err != nil {
		t.Fatal(err)
	}
	hs, _ = e.s.History(ctx, "big")
	if len(hs) != 1 || hs[0].End != string(outcome.Completed) || hs[0].Fence != b.Fence || hs[0].Worker != "" {
		t.Fatalf("large result's history = %+v", hs)
	}
	if dup, _ := e.s.Claim(ctx, "big", fp("d")); dup.Outcome != Duplicate || string(dup.Record.Result) != big {
		t.Fatalf("the large result's duplicate: %v", dup.Outcome)
	}

	s, _ := e.s.Claim(ctx, "scan", fp("c"))
	if err := e.s.HistoryStart(ctx, "scan", Attempt{Fence: s.Fence + 1}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Complete(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	hs, _ = e.s.History(ctx, "scan")
	if len(hs) != 2 || hs[0].Fence != s.Fence || hs[0].End != string(outcome.Completed) || hs[1].End != "" {
		t.Fatalf("scanned key's history = %+v", hs)
	}
}

// TestHistoryEndMatchesOnlyMembers: the complete script ends the last entry
// on its JSON text; a worker name holding the texts it looks for ('"x":',
// '"f":"<fence>"') is escaped in the entry and neither hides the entry's
// open end nor ends another fence's entry.
func TestHistoryEndMatchesOnlyMembers(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	c := e.s.ClaimBatch(ctx, []Request{{Key: "k", Fingerprint: fp("a"), Worker: `w"x":"failed"`}})[0]
	if c.Err != nil || c.Outcome != Acquired {
		t.Fatalf("claim: %+v", c)
	}
	if err := e.s.Complete(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	hs, _ := e.s.History(ctx, "k")
	if len(hs) != 1 || hs[0].End != string(outcome.Completed) || hs[0].Worker != `w"x":"failed"` || hs[0].Ended.IsZero() {
		t.Fatalf("history = %+v", hs)
	}

	d := e.s.ClaimBatch(ctx, []Request{{Key: "d", Fingerprint: fp("b"), Worker: "host/1"}})[0]
	if d.Err != nil || d.Outcome != Acquired {
		t.Fatalf("claim: %+v", d)
	}
	// A later entry whose worker name spells d's fence: not d's entry.
	if err := e.s.HistoryStart(ctx, "d", Attempt{Fence: d.Fence + 1, Worker: fmt.Sprintf(`"f":"%d"`, d.Fence)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Complete(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	hs, _ = e.s.History(ctx, "d")
	if len(hs) != 2 || hs[0].Fence != d.Fence || hs[0].End != string(outcome.Completed) || hs[1].End != "" {
		t.Fatalf("history = %+v", hs)
	}
}

// TestHistoryTakeoverEndsPrevious: a takeover's claim ends the previous
// attempt's entry as taken over and starts its own; the new owner's
// completion ends it as completed; the old owner's refused completion
// writes nothing.
func TestHistoryTakeoverEndsPrevious(t *testing.T) {
	t.Parallel()
	e, _ := setupCounted(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	first := e.s.ClaimBatch(ctx, []Request{{Key: "k", Fingerprint: fp("a"), Worker: "host/1"}})[0]
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	// The owner stalls: its lease key expires.
	if err := e.c.Del(ctx, first.keys.lease).Err(); err != nil {
		t.Fatal(err)
	}
	second := e.s.ClaimBatch(ctx, []Request{{Key: "k", Fingerprint: fp("a"), Worker: "host/2"}})[0]
	if second.Err != nil || second.Outcome != Takeover || second.PrevFence != first.Fence {
		t.Fatalf("second claim: %+v", second)
	}
	hs, _ := e.s.History(ctx, "k")
	if len(hs) != 2 || hs[0].Fence != first.Fence || hs[0].End != string(outcome.TakenOver) || !hs[0].TakenOver ||
		hs[0].Ended.IsZero() || hs[1].Fence != second.Fence || hs[1].Attempt != 2 || hs[1].Worker != "host/2" || hs[1].End != "" {
		t.Fatalf("history after the takeover = %+v", hs)
	}
	if err := e.s.Complete(ctx, first, nil); err == nil {
		t.Fatal("the old owner's completion was accepted")
	}
	if err := e.s.Complete(ctx, second, []byte("r")); err != nil {
		t.Fatal(err)
	}
	hs, _ = e.s.History(ctx, "k")
	if len(hs) != 2 || hs[0].End != string(outcome.TakenOver) || hs[1].End != string(outcome.Completed) {
		t.Fatalf("history after the completion = %+v", hs)
	}
}

// TestHistoryJobType: the claim script keeps each attempt's job type in its
// start entry, cut to MaxHistoryType bytes at a character boundary, in a
// batch whose entries each carry their own; an entry written before the type
// was kept (no "ty" field) still reads, with no type.
func TestHistoryJobType(t *testing.T) {
	t.Parallel()
	e, _ := setupCounted(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	long := strings.Repeat("x", MaxHistoryType-1) + "é.more" // é straddles the bound
	cs := e.s.ClaimBatch(ctx, []Request{{Key: "typed", Fingerprint: fp("a"), Type: "payments.transfer"},
		{Key: "untyped", Fingerprint: fp("b")}, {Key: "long", Fingerprint: fp("c"), Type: long}})
	for _, c := range cs {
		if c.Err != nil || c.Outcome != Acquired {
			t.Fatalf("claim: %+v", c)
		}
	}
	for k, want := range map[string]string{"typed": "payments.transfer", "untyped": "", "long": long[:MaxHistoryType-1]} {
		hs, err := e.s.History(ctx, k)
		if err != nil || len(hs) != 1 || hs[0].Type != want || hs[0].Fence != cs[0].Fence && k == "typed" {
			t.Fatalf("history of %s = %+v, %v: want one attempt of type %q", k, hs, err, want)
		}
	}
	// An entry as an older claim script wrote it.
	old := `{"f":"1795636475671091","a":1,"s":1795636475671,"o":"3f9a1c0e","w":"host/1","x":"completed","e":1795636475700}`
	hk := e.s.historyKey(e.s.Tag("old"), "old")
	if err := e.c.RPush(ctx, hk, old).Err(); err != nil {
		t.Fatal(err)
	}
	hs, err := e.s.History(ctx, "old")
	if err != nil || len(hs) != 1 || hs[0].Type != "" || hs[0].Worker != "host/1" || hs[0].End != string(outcome.Completed) {
		t.Fatalf("older entry reads %+v, %v", hs, err)
	}
}

// TestHistoryOffWritesNothing: with WithHistory(0) the claim and complete
// scripts write no history list.
func TestHistoryOffWritesNothing(t *testing.T) {
	t.Parallel()
	e, _ := setupCounted(t, []Opt{WithHistory(0)})
	ctx := t.Context()
	c := e.s.ClaimBatch(ctx, []Request{{Key: "k", Fingerprint: fp("a"), Worker: "host/1"}})[0]
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	if err := e.s.Complete(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	if n := e.c.Exists(ctx, c.keys.history).Val(); n != 0 {
		t.Fatalf("history key written with history 0")
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestFirstAttemptHistoryInRecord: a key's first attempt keeps its history
// entry in its record, so a job done at its first try writes no history
// list; History reads it from the record. The entry moves into the list, the
// list's own fields winning, when a retry's claim, a reset or a compensation
// step needs it there, and reads the same before and after.
func TestFirstAttemptHistoryInRecord(t *testing.T) {
	t.Parallel()
	e, _ := setupCounted(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	claim := func(k, worker string) *Claim {
		t.Helper()
		c := e.s.ClaimBatch(ctx, []Request{{Key: k, Fingerprint: fp("a"), Worker: worker, Type: "payments.transfer"}})[0]
		if c.Err != nil || c.Outcome != Acquired {
			t.Fatalf("claim %s: %+v", k, c)
		}
		return c
	}
	listed := func(k string) []string {
		t.Helper()
		v, err := e.c.LRange(ctx, e.s.historyKey(e.s.Tag(k), k), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	history := func(k string, want int) []Attempt {
		t.Helper()
		hs, err := e.s.History(ctx, k)
		if err != nil || len(hs) != want {
			t.Fatalf("history of %s = %+v, %v; want %d attempts", k, hs, err, want)
		}
		return hs
	}
	whole := func(a Attempt, c *Claim, worker, end string) {
		t.Helper()
		if a.Fence != c.Fence || a.Attempt != c.Attempt || a.Worker != worker || a.Type != "payments.transfer" ||
			a.Owner == "" || a.Started.IsZero() || a.End != end || (end != "" && a.Ended.Before(a.Started)) {
			t.Fatalf("attempt %+v, want fence %d, attempt %d, worker %s, end %q", a, c.Fence, c.Attempt, worker, end)
		}
	}

	// Done at the first try: no list.
	done := claim("done", "host/1")
	whole(history("done", 1)[0], done, "host/1", "")
	if err := e.s.Complete(ctx, done, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if l := listed("done"); len(l) != 0 {
		t.Fatalf("a job done at its first try wrote a history list: %q", l)
	}
	whole(history("done", 1)[0], done, "host/1", string(outcome.Completed))

	// A retry: the first attempt's end goes to the list, its start stays in
	// the RELEASED record until the next claim moves it.
	r1 := claim("retry", "host/1")
	if err := e.s.Fail(ctx, r1, Retryable, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	if err := e.s.HistoryEnd(ctx, "retry", r1.Fence, string(outcome.Retry)); err != nil {
		t.Fatal(err)
	}
	whole(history("retry", 1)[0], r1, "host/1", string(outcome.Retry))
	r2 := claim("retry", "host/2")
	if l := listed("retry"); len(l) != 2 {
		t.Fatalf("list after the retry's claim = %q: want the first attempt's entry, then the second's", l)
	} else if a, ok := decodeAttempt([]byte(l[0])); !ok || a.Worker != "host/1" || a.End != string(outcome.Retry) || a.Started.IsZero() {
		t.Fatalf("first attempt in the list = %q: want its start and its end", l[0])
	}
	hs := history("retry", 2)
	whole(hs[0], r1, "host/1", string(outcome.Retry))
	whole(hs[1], r2, "host/2", "")

	// The owner's own end, written to the list, wins over the record's.
	x := claim("cancelled", "host/1")
	if err := e.s.Fail(ctx, x, Terminal, errors.New("cancelled by an operator")); err != nil {
		t.Fatal(err)
	}
	if err := e.s.HistoryEnd(ctx, "cancelled", x.Fence, string(outcome.Cancelled)); err != nil {
		t.Fatal(err)
	}
	whole(history("cancelled", 1)[0], x, "host/1", string(outcome.Cancelled))

	// A compensation step for a first attempt joins the record's entry.
	c := claim("comp", "host/1")
	if err := e.s.HistoryCompensation(ctx, "comp", c.Fence, CompensationStep{Step: "hold", Outcome: "compensated"}); err != nil {
		t.Fatal(err)
	}
	hs = history("comp", 1)
	whole(hs[0], c, "host/1", "")
	if len(hs[0].Compensations) != 1 || hs[0].Compensations[0].Step != "hold" {
		t.Fatalf("compensations %+v", hs[0].Compensations)
	}

	// A reset deletes the record, not the history: the entry moves.
	if _, err := e.s.Reset(ctx, "done", false); err != nil {
		t.Fatal(err)
	}
	if l := listed("done"); len(l) != 1 {
		t.Fatalf("list after the reset = %q", l)
	}
	whole(history("done", 1)[0], done, "host/1", string(outcome.Completed))
	again := claim("done", "host/3")
	hs = history("done", 2)
	whole(hs[0], done, "host/1", string(outcome.Completed))
	whole(hs[1], again, "host/3", "")
}

// TestHistoryLeastPrivilegeUser: a store whose Redis user has the project's
// least-privilege ACL (+@read +@write +@scripting +@connection +time, no
// MULTI) writes and reads a key's history: the first attempt from its
// record, a retry's from the list.
func TestHistoryLeastPrivilegeUser(t *testing.T) {
	t.Parallel()
	const user, password = "lh-history", "s3cret-h"
	srv := testkit.StartRedis(t, testkit.WithACLUser(user, password, testkit.ProjectACLRules("h:")...))
	o := srv.Options()
	o.Username, o.Password = user, password
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	e := setupOn(t, c, "h:", []Opt{WithMaxmemoryPolicy("noeviction")})
	ctx := t.Context()
	first := e.s.ClaimBatch(ctx, []Request{{Key: "k", Fingerprint: fp("a"), Worker: "host/1"}})[0]
	if first.Err != nil || first.Outcome != Acquired {
		t.Fatalf("claim: %+v", first)
	}
	if hs, err := e.s.History(ctx, "k"); err != nil || len(hs) != 1 || hs[0].Fence != first.Fence || hs[0].Worker != "host/1" {
		t.Fatalf("history of a running first attempt = %+v, %v", hs, err)
	}
	if err := e.s.Fail(ctx, first, Retryable, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	second := e.s.ClaimBatch(ctx, []Request{{Key: "k", Fingerprint: fp("a"), Worker: "host/2"}})[0]
	if second.Err != nil || second.Outcome != Acquired {
		t.Fatalf("second claim: %+v", second)
	}
	if err := e.s.Complete(ctx, second, nil); err != nil {
		t.Fatal(err)
	}
	hs, err := e.s.History(ctx, "k")
	if err != nil || len(hs) != 2 || hs[0].Worker != "host/1" || hs[1].Worker != "host/2" || hs[1].End != string(outcome.Completed) {
		t.Fatalf("history = %+v, %v", hs, err)
	}
}

// TestLookupHistoryOneRead: LookupHistory reads the record and the history
// from one read of the record. While another client deletes and puts back
// the record of a key done at its first try (as its bucket's expiry and a
// new claim would), every read shows either the finished record with its
// attempt or no record and no attempt, never the record without the
// attempt it keeps (what a lookup and a History call apart could show).
func TestLookupHistoryOneRead(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	c := e.s.ClaimBatch(ctx, []Request{{Key: "torn", Fingerprint: fp("a"), Worker: "host/1"}})[0]
	if c.Err != nil || c.Outcome != Acquired {
		t.Fatalf("claim: %+v", c)
	}
	if err := e.s.Complete(ctx, c, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	h := hashKey("torn")
	tag := e.s.Tag("torn")
	base, n := e.s.windowRange(e.s.cfg.windows, true)
	bucket, raw := "", ""
	for i := range n {
		if v, err := e.c.HGet(ctx, e.s.bucketKey(tag, base+int64(i)), h.field()).Result(); err == nil {
			bucket, raw = e.s.bucketKey(tag, base+int64(i)), v
		}
	}
	if bucket == "" {
		t.Fatal("no bucket holds the record")
	}

	stop := make(chan struct{})
	toggled := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				toggled <- e.c.HSet(ctx, bucket, h.field(), raw).Err()
				return
			default:
			}
			if err := e.c.HDel(ctx, bucket, h.field()).Err(); err != nil {
				toggled <- err
				return
			}
			if err := e.c.HSet(ctx, bucket, h.field(), raw).Err(); err != nil {
				toggled <- err
				return
			}
		}
	}()
	seen := map[State]int{}
	for reads := 0; (seen[Absent] < 50 || seen[Completed] < 50) && reads < 100000; reads++ {
		info, hs, err := e.s.LookupHistory(ctx, "torn")
		if err != nil {
			close(stop)
			t.Fatal(err)
		}
		seen[info.State]++
		if ok := (info.State == Absent && len(hs) == 0) || (info.State == Completed && len(hs) == 1 && hs[0].Fence == c.Fence); !ok {
			close(stop)
			t.Fatalf("read %d: state %v with %d attempts: a torn view", reads, info.State, len(hs))
		}
	}
	close(stop)
	if err := <-toggled; err != nil {
		t.Fatal(err)
	}
	if seen[Absent] < 50 || seen[Completed] < 50 {
		t.Fatalf("the record was seen gone %d times and present %d times: the race was not exercised", seen[Absent], seen[Completed])
	}
}

// TestRecordReadOrder: a claim moves a key's record only into its current
// window's bucket (from an earlier window's, or another layout's). Lookup,
// LookupStates and History read the buckets a record may leave before the
// ones it may enter (other layouts', then the windows oldest first), so a
// record moved while a pipeline runs is found where it went if not where it
// was; and of what they found, they take the newest window's record first,
// as a claim does. Redis runs a pipeline's commands together unless the
// pipeline spans several reads of the connection, so the order is checked
// as queued rather than by racing a move against a read.
func TestRecordReadOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	h := hashKey("order")
	tag := e.s.Tag("order")
	base, n := int64(1000), 3
	olds := [][2]int64{{7, 11}}
	p := e.c.Pipeline()
	r := e.s.readRecord(ctx, p, tag, &h, base, n, olds)
	var got []string
	for _, c := range p.(*redis.Pipeline).Cmds() {
		got = append(got, c.Args()[1].(string))
	}
	want := []string{e.s.otherBucketKey(tag, 7, 11)}
	for w := base; w < base+int64(n); w++ {
		want = append(want, e.s.bucketKey(tag, w))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("buckets read in the order %q, want %q (left before entered)", got, want)
	}
	// The newest window's record wins over an older one's and another
	// layout's.
	for i, v := range []string{"other", "w0", "w1", "w2"} {
		if err := e.c.HSet(ctx, want[i], h.field(), v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if raw, ok := r.newest(); !ok || raw != "w2" {
		t.Fatalf("newest = %q, %v; want the newest window's record", raw, ok)
	}
}

// TestCarriedEntryForms: the binary entry a record carries becomes the
// list's JSON entry with every field (the IDs, kept raw, as hex again) when a
// retry's claim or a reset moves it; and a record written before the binary
// form, carrying the JSON text, is still read by History and moved by a
// claim.
func TestCarriedEntryForms(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithHistory(4)})
	ctx := t.Context()
	const trace, span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	claim := func(k, worker string) *Claim {
		t.Helper()
		c := e.s.ClaimBatch(ctx, []Request{{Key: k, Fingerprint: fp("a"), Worker: worker, Type: "payments.transfer",
			TraceID: trace, SpanID: span}})[0]
		if c.Err != nil || c.Outcome != Acquired {
			t.Fatalf("claim %s: %+v", k, c)
		}
		return c
	}
	listed := func(k string, want int) []Attempt {
		t.Helper()
		v, err := e.c.LRange(ctx, e.s.historyKey(e.s.Tag(k), k), 0, -1).Result()
		if err != nil || len(v) != want {
			t.Fatalf("list of %s = %q, %v; want %d entries", k, v, err, want)
		}
		out := make([]Attempt, len(v))
		for i, l := range v {
			a, ok := decodeAttempt([]byte(l))
			if !ok {
				t.Fatalf("list entry %q is not JSON", l)
			}
			out[i] = a
		}
		return out
	}
	whole := func(a Attempt, c *Claim, worker, end string) {
		t.Helper()
		if a.Fence != c.Fence || a.Attempt != c.Attempt || a.Worker != worker || a.Type != "payments.transfer" ||
			a.TraceID != trace || a.SpanID != span || a.Owner == "" || a.Started.IsZero() || a.End != end ||
			(end != "" && a.Ended.Before(a.Started)) {
			t.Fatalf("attempt %+v, want fence %d, attempt %d, worker %s, trace and span, end %q", a, c.Fence, c.Attempt, worker, end)
		}
	}

	// A retry's claim moves the binary entry into the list.
	r1 := claim("retry", "host/1")
	if err := e.s.Fail(ctx, r1, Retryable, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	r2 := claim("retry", "host/2")
	l := listed("retry", 2)
	whole(l[0], r1, "host/1", "")
	whole(l[1], r2, "host/2", "")

	// A reset moves a completed record's entry, ended.
	d := claim("reset", "host/1")
	if err := e.s.Complete(ctx, d, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Reset(ctx, "reset", false); err != nil {
		t.Fatal(err)
	}
	whole(listed("reset", 1)[0], d, "host/1", string(outcome.Completed))

	// A record that carries the JSON text of an entry (written before the
	// binary form): swap the record's entry for it.
	toJSON := func(c *Claim) {
		t.Helper()
		bk := e.s.bucketKey(c.tag, c.window)
		v, err := e.c.HGet(ctx, bk, c.h.field()).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRecord(v, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		a, ok := decodeEntry(r.entry, r.Fence, r.Attempt)
		if !ok {
			t.Fatalf("entry %q", r.entry)
		}
		r.entry = fmt.Appendf(nil, `{"f":"%d","a":%d,"s":%d,"o":"%s","w":"%s","t":"%s","sp":"%s","ty":"%s"`,
			a.Fence, a.Attempt, a.Started.UnixMilli(), a.Owner, a.Worker, a.TraceID, a.SpanID, a.Type)
		if a.End != "" {
			r.entry = fmt.Appendf(r.entry, `,"e":%d,"x":"%s"`, a.Ended.UnixMilli(), a.End)
		}
		r.entry = append(r.entry, '}')
		if err := e.c.HSet(ctx, bk, c.h.field(), encodeRecord(r, false)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	o := claim("old", "host/1")
	if err := e.s.Complete(ctx, o, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	toJSON(o)
	hs, err := e.s.History(ctx, "old")
	if err != nil || len(hs) != 1 {
		t.Fatalf("history of old = %+v, %v", hs, err)
	}
	whole(hs[0], o, "host/1", string(outcome.Completed))
	listed("old", 0)

	o1 := claim("old-retry", "host/1")
	toJSON(o1)
	if err := e.s.Fail(ctx, o1, Retryable, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	o2 := claim("old-retry", "host/2")
	l = listed("old-retry", 2)
	whole(l[0], o1, "host/1", "")
	whole(l[1], o2, "host/2", "")
}
