package idempotency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// finishHook intercepts the finishing scripts (idem_complete, the batch, and
// idem_release) on a client, and watches the lease renewals the Manager
// sends on the same client, so that a test can run something between a
// finishing script and the Store's handling of its answer: a renewal of the
// lease whose key the script just deleted, the local deadline passing, a
// lost answer.
type finishHook struct {
	mu       sync.Mutex
	watch    map[string]bool // lease keys whose renewal answers are counted
	answers  map[string][]int64
	renewals int // renew calls sent so far (any key)
	// before runs before a finishing script is sent, after when it has
	// answered (err is its error); after may replace the error the Store
	// sees. drop, when set, is the error of a script that is not sent at
	// all. Nil: pass through.
	before func()
	after  func(err error) error
	drop   error
}

func (h *finishHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func finishing(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 || fmt.Sprint(args[0]) != "evalsha" {
		return false
	}
	switch fmt.Sprint(args[1]) {
	case scripts.IdemComplete.Hash(), scripts.IdemCompleteBatch.Hash(), scripts.IdemRelease.Hash():
		return true
	}
	return false
}

func (h *finishHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !finishing(cmd) {
			return next(ctx, cmd)
		}
		return h.around(func() error { return next(ctx, cmd) }, []redis.Cmder{cmd})
	}
}

func (h *finishHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if finishing(c) {
				return h.around(func() error { return next(ctx, cmds) }, cmds)
			}
		}
		renew := false
		for _, c := range cmds {
			if isRenewal(c) {
				renew = true
			}
		}
		err := next(ctx, cmds)
		if renew {
			h.renewed(cmds)
		}
		return err
	}
}

func (h *finishHook) around(send func() error, cmds []redis.Cmder) error {
	h.mu.Lock()
	before, after, drop := h.before, h.after, h.drop
	h.mu.Unlock()
	if drop != nil {
		for _, c := range cmds {
			c.SetErr(drop)
		}
		return drop
	}
	if before != nil {
		before()
	}
	err := send()
	if after != nil {
		if err = after(err); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
		}
	}
	return err
}

// isRenewal reports whether c is part of a lease renewal: the script's call,
// or the GETEX that extends a lease and reads its owner (the plain
// commands' path, internal/leasing/renew_native.go).
func isRenewal(c redis.Cmder) bool {
	a := c.Args()
	switch {
	case len(a) > 1 && fmt.Sprint(a[0]) == "evalsha":
		return fmt.Sprint(a[1]) == scripts.LeaseRenew.Hash()
	case len(a) > 1 && fmt.Sprint(a[0]) == "getex":
		return true
	}
	return false
}

// thiefToken is the owner token these tests write to steal a lease.
const thiefToken = "thief"

// renewed records the answers of a renew pipeline for the watched keys: the
// script's statuses, or for the plain commands what the GETEX read: no owner
// (LeaseNoOwner), the thief's token (LeaseOtherOwner), the holder's (LeaseOK).
func (h *finishHook) renewed(cmds []redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.renewals++
	for _, c := range cmds {
		if read, ok := c.(*redis.StringCmd); ok && isRenewal(c) {
			err := read.Err()
			if k := fmt.Sprint(c.Args()[1]); h.watch[k] && (err == nil || errors.Is(err, redis.Nil)) {
				code := int64(scripts.LeaseOK)
				switch v := read.Val(); {
				case errors.Is(err, redis.Nil):
					code = scripts.LeaseNoOwner
				case strings.HasPrefix(v, thiefToken+" "):
					code = scripts.LeaseOtherOwner
				}
				h.answers[k] = append(h.answers[k], code)
			}
			continue
		}
		cmd, ok := c.(*redis.Cmd)
		if !ok {
			continue
		}
		codes, err := cmd.Int64Slice()
		if err != nil {
			continue
		}
		a := cmd.Args()
		n, _ := strconv.Atoi(fmt.Sprint(a[2]))
		for i := 0; i < n && i < len(codes); i++ {
			if k := fmt.Sprint(a[3+i]); h.watch[k] {
				h.answers[k] = append(h.answers[k], codes[i])
			}
		}
	}
}

func (h *finishHook) set(before func(), after func(error) error, keys ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before, h.after, h.drop = before, after, nil
	h.watch, h.answers = map[string]bool{}, map[string][]int64{}
	for _, k := range keys {
		h.watch[k] = true
	}
}

// count returns how many renewals of key answered code.
func (h *finishHook) count(key string, code int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.answers[key] {
		if c == code {
			n++
		}
	}
	return n
}

func (h *finishHook) rounds() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewals
}

// waitRenewed waits until a renewal of every key has answered code, and
// then until one more renew call has been sent (so that the Manager has
// applied the answers: a round starts after the previous one's answers were
// handled), or until one of the leases ends. It fails the test after 5s.
func (h *finishHook) waitRenewed(t *testing.T, code int64, ls []*lease.Lease, keys []string) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	seen := -1
	for time.Now().Before(end) {
		for _, l := range ls {
			if l.Err() != nil {
				return
			}
		}
		all := true
		for _, k := range keys {
			all = all && h.count(k, code) > 0
		}
		switch {
		case all && seen < 0:
			seen = h.rounds()
		case seen >= 0 && h.rounds() > seen:
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Errorf("no renewal answered %d for %q within 5s", code, keys)
}

// hooked is a Store whose client carries a finishHook, with a lease renew
// interval short enough that renewals run while a script is held up.
func hooked(t *testing.T, leaseOpts ...lease.Opt) (*env, *finishHook) {
	t.Helper()
	c, prefix := testkit.SharedRedis(t)
	h := &finishHook{}
	c.AddHook(h)
	return setupOn(t, c, prefix, nil, leaseOpts...), h
}

// lostWatch records the OnLost callbacks of leases.
type lostWatch struct {
	mu   sync.Mutex
	errs map[string]error
}

func watchLost(ls ...*lease.Lease) *lostWatch {
	w := &lostWatch{errs: map[string]error{}}
	for _, l := range ls {
		l.OnLost(func(err error) {
			w.mu.Lock()
			w.errs[l.Name()] = err
			w.mu.Unlock()
		})
	}
	return w
}

func (w *lostWatch) get(l *lease.Lease) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs[l.Name()]
}

// released checks that l ended as released (not lost), and that no OnLost
// callback ran for it.
func released(t *testing.T, w *lostWatch, l *lease.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	default:
		t.Fatalf("lease %q still held after its key finished", l.Name())
	}
	if err := l.Err(); !errors.Is(err, lease.ErrReleased) {
		t.Errorf("lease %q ended with %v, want ErrReleased", l.Name(), err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lease.ErrReleased) || errors.Is(cause, lease.ErrLost) {
		t.Errorf("lease %q context cause %v, want ErrReleased", l.Name(), cause)
	}
	if err := w.get(l); err != nil {
		t.Errorf("OnLost ran for lease %q of a committed key: %v", l.Name(), err)
	}
}

// The race a finishing script opens: it deletes the lease key in the same
// step as the record write, and a renewal sent before the Store ends the
// lease locally finds the key gone. Each finishing call is held up after its
// script's answer until such a renewal has been answered and applied: the
// lease must end released, with no OnLost and no ErrLost cause, and the
// outcome must stand.
func TestFinishRenewalAfterScriptIsNoLoss(t *testing.T) {
	t.Parallel()
	const interval = 40 * time.Millisecond
	e, h := hooked(t, lease.WithRenewInterval(interval))
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		n      int // claims finished together
		finish func(cs []*Claim) []error
		want   Outcome // a later claim of the key
	}{
		{"complete", 1, func(cs []*Claim) []error { return []error{e.s.Complete(ctx, cs[0], []byte("r"))} }, Duplicate},
		{"complete batch", 3, func(cs []*Claim) []error {
			comps := make([]Completion, len(cs))
			for i, c := range cs {
				comps[i] = Completion{Claim: c, Result: []byte("r")}
			}
			return e.s.CompleteBatch(ctx, comps)
		}, Duplicate},
		{"fail terminal", 1, func(cs []*Claim) []error {
			return []error{e.s.Fail(ctx, cs[0], Terminal, errors.New("boom"))}
		}, Duplicate},
		{"fail retryable", 1, func(cs []*Claim) []error {
			return []error{e.s.Fail(ctx, cs[0], Retryable, errors.New("again"))}
		}, Acquired},
		{"fail keep", 1, func(cs []*Claim) []error { return []error{e.s.Fail(ctx, cs[0], Keep, errors.New("hold"))} }, Held},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, ls, keys := e.claimN(t, tc.name, tc.n)
			w := watchLost(ls...)
			h.set(nil, func(err error) error {
				if err == nil {
					h.waitRenewed(t, scripts.LeaseNoOwner, ls, keys)
				}
				return err
			}, keys...)
			defer h.set(nil, nil)
			for i, err := range tc.finish(cs) {
				if err != nil {
					t.Fatalf("finish %d: %v", i, err)
				}
			}
			for i, l := range ls {
				if h.count(keys[i], scripts.LeaseNoOwner) == 0 {
					t.Fatalf("no renewal of %q ran between the script and the end of the lease", keys[i])
				}
				released(t, w, l)
			}
			// A late callback would have run by now (they run at once, in
			// their own goroutine).
			time.Sleep(3 * interval)
			for _, l := range ls {
				if err := w.get(l); err != nil {
					t.Errorf("OnLost ran late for %q: %v", l.Name(), err)
				}
			}
			for _, held := range e.m.Held() {
				for _, l := range ls {
					if held == l {
						t.Errorf("Manager still holds the lease %q", l.Name())
					}
				}
			}
			for _, c := range cs {
				e.claim(t, c.Key, fp("a"), tc.want)
			}
		})
	}
}

// The local deadline passes while the finishing script's answer is on its
// way (renewals find the key gone and do not move the deadline): the script
// checked ownership atomically, so the commit stands and the lease is not
// lost.
func TestFinishPastLocalDeadlineIsNoLoss(t *testing.T) {
	t.Parallel()
	const ttl, interval = 300 * time.Millisecond, 40 * time.Millisecond
	e, h := hooked(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	c := e.claim(t, "k", fp("a"), Acquired)
	w := watchLost(c.Lease)
	h.set(nil, func(err error) error {
		time.Sleep(time.Until(c.Lease.Deadline()) + 3*interval)
		return err
	}, e.m.Key(c.Lease.Name()))
	if err := e.s.Complete(t.Context(), c, []byte("r")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if time.Now().Before(c.Lease.Deadline()) {
		t.Fatalf("the local deadline %v had not passed when the answer was handled", c.Lease.Deadline())
	}
	released(t, w, c.Lease)
	d := e.claim(t, "k", fp("a"), Duplicate)
	if string(d.Record.Result) != "r" {
		t.Fatalf("record result %q", d.Record.Result)
	}
}

// A finishing script that is refused (the lease was taken while the call was
// on its way) still reports the loss: ErrLeaseLost from the Store, OnLost
// with the cause, the context cancelled with it, even though renewals that
// answered "stolen" while the script was in flight were held back.
func TestFinishRefusedReportsLoss(t *testing.T) {
	t.Parallel()
	const interval = 40 * time.Millisecond
	e, h := hooked(t, lease.WithRenewInterval(interval))
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		n    int // claims finished together; the first one is stolen
		run  func(cs []*Claim) []error
	}{
		{"complete", 1, func(cs []*Claim) []error { return []error{e.s.Complete(ctx, cs[0], []byte("r"))} }},
		{"complete batch", 2, func(cs []*Claim) []error {
			return e.s.CompleteBatch(ctx, []Completion{{Claim: cs[0]}, {Claim: cs[1]}})
		}},
		{"fail retryable", 1, func(cs []*Claim) []error { return []error{e.s.Fail(ctx, cs[0], Retryable, nil)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, ls, _ := e.claimN(t, tc.name, tc.n)
			w := watchLost(ls...)
			stolen := e.m.Key(ls[0].Name())
			h.set(func() {
				// Taken by another owner just before the script runs.
				if err := e.c.Do(t.Context(), "set", stolen, thiefToken+" 1 60000", "keepttl").Err(); err != nil {
					t.Error(err)
				}
			}, func(err error) error {
				h.waitRenewed(t, scripts.LeaseOtherOwner, ls[:1], []string{stolen})
				if l := ls[0]; l.Err() != nil {
					t.Errorf("the loss was reported while the script's answer was pending: %v", l.Err())
				}
				return err
			}, stolen)
			defer h.set(nil, nil)
			errs := tc.run(cs)
			if !errors.Is(errs[0], ErrLeaseLost) || !errors.Is(errs[0], lease.ErrLost) {
				t.Fatalf("finish of the stolen key = %v, want ErrLeaseLost", errs[0])
			}
			l := ls[0]
			select {
			case <-l.Done():
			default:
				t.Fatal("the refused lease is still held")
			}
			if !errors.Is(l.Err(), lease.ErrLost) || !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
				t.Fatalf("refused lease: err %v, cause %v; want ErrLost", l.Err(), context.Cause(l.Context()))
			}
			for end := time.Now().Add(time.Second); w.get(l) == nil && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			if err := w.get(l); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("OnLost of the refused lease got %v, want ErrLost", err)
			}
			for i, err := range errs[1:] {
				if err != nil {
					t.Fatalf("finish of the other key %d: %v", i+1, err)
				}
				released(t, w, ls[i+1])
			}
		})
	}
}

func (h *finishHook) dropAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop = err
}

// netErr is what a client sees when its connection breaks.
var netErr = &net.OpError{Op: "read", Net: "tcp", Err: io.ErrUnexpectedEOF}

// A finishing script that never reached Redis leaves the lease held and
// renewed; the call can be made again and then succeeds.
func TestFinishUnsentKeepsLease(t *testing.T) {
	t.Parallel()
	const interval = 40 * time.Millisecond
	e, h := hooked(t, lease.WithRenewInterval(interval))
	c := e.claim(t, "k", fp("a"), Acquired)
	w := watchLost(c.Lease)
	key := e.m.Key(c.Lease.Name())
	h.set(nil, nil, key)
	h.dropAll(netErr)
	if err := e.s.Complete(t.Context(), c, []byte("r")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Complete without an answer = %v, want ErrUnavailable", err)
	}
	h.set(nil, nil, key)
	h.waitRenewed(t, scripts.LeaseOK, []*lease.Lease{c.Lease}, []string{key})
	if err := c.Lease.Err(); err != nil {
		t.Fatalf("lease ended after an unsent finish: %v", err)
	}
	if err := e.s.Complete(t.Context(), c, []byte("r")); err != nil {
		t.Fatalf("Complete again: %v", err)
	}
	released(t, w, c.Lease)
}

// A finishing script that ran but whose answer was lost has deleted the
// lease key: sent again, it finds its own outcome (same fence) and answers
// written, instead of "lease lost" for a key that committed.
func TestFinishResentAfterLostAnswer(t *testing.T) {
	t.Parallel()
	// No renewal during the test: the renewer would find the key gone and
	// end the lease before the resend (the caller's race to win; here the
	// scripts alone are under test).
	e, h := hooked(t, lease.WithTTL(20*time.Second), lease.WithRenewInterval(15*time.Second))
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		n      int
		finish func(cs []*Claim) []error
		want   Outcome
		result string
	}{
		{"complete", 1, func(cs []*Claim) []error { return []error{e.s.Complete(ctx, cs[0], []byte("r"))} }, Duplicate, "r"},
		{"complete batch", 2, func(cs []*Claim) []error {
			return e.s.CompleteBatch(ctx, []Completion{{Claim: cs[0], Result: []byte("r")}, {Claim: cs[1], Result: []byte("r")}})
		}, Duplicate, "r"},
		{"fail terminal", 1, func(cs []*Claim) []error {
			return []error{e.s.Fail(ctx, cs[0], Terminal, errors.New("boom"))}
		}, Duplicate, "boom"},
		{"fail retryable", 1, func(cs []*Claim) []error { return []error{e.s.Fail(ctx, cs[0], Retryable, nil)} }, Acquired, ""},
		{"fail keep", 1, func(cs []*Claim) []error { return []error{e.s.Fail(ctx, cs[0], Keep, nil)} }, Held, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, ls, keys := e.claimN(t, tc.name, tc.n)
			w := watchLost(ls...)
			h.set(nil, func(err error) error {
				if err != nil {
					t.Errorf("the first send failed for real: %v", err)
				}
				return netErr
			}, keys...)
			for i, err := range tc.finish(cs) {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("finish %d with its answer lost = %v, want ErrUnavailable", i, err)
				}
			}
			for i, l := range ls {
				if err := l.Err(); err != nil {
					t.Fatalf("lease %d ended after a lost answer: %v", i, err)
				}
				if n, _ := e.c.Exists(t.Context(), keys[i]).Result(); n != 0 {
					t.Fatalf("lease key %d still there: the first send did not run", i)
				}
			}
			h.set(nil, nil)
			for i, err := range tc.finish(cs) {
				if err != nil {
					t.Fatalf("finish %d sent again = %v, want nil (its own outcome is recorded)", i, err)
				}
			}
			for _, l := range ls {
				released(t, w, l)
			}
			for _, c := range cs {
				got := e.claim(t, c.Key, fp("a"), tc.want)
				if tc.want == Duplicate && string(got.Record.Result) != tc.result {
					t.Errorf("record of %q: %q, want %q", c.Key, got.Record.Result, tc.result)
				}
			}
		})
	}
}

// A resent finishing script does not take another fence's outcome for its
// own: after a takeover completed the key, the zombie's resend is refused.
func TestFinishResendOfAnotherFenceRefused(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := t.Context()
	zombie := setupOn(t, c, prefix, nil, lease.WithTTL(20*time.Second), lease.WithRenewInterval(15*time.Second))
	owner := setupOn(t, c, prefix, nil)
	z := zombie.claim(t, "k", fp("a"), Acquired)
	if err := c.Del(ctx, zombie.m.Key(z.Lease.Name())).Err(); err != nil {
		t.Fatal(err)
	}
	n := owner.claim(t, "k", fp("a"), Takeover)
	if err := owner.s.Complete(ctx, n, []byte("new owner")); err != nil {
		t.Fatal(err)
	}
	if err := zombie.s.Complete(ctx, z, []byte("zombie")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("zombie Complete over a COMPLETED record of fence %d = %v, want ErrLeaseLost", n.Fence, err)
	}
	d := owner.claim(t, "k", fp("a"), Duplicate)
	if string(d.Record.Result) != "new owner" || d.Record.Fence != n.Fence {
		t.Fatalf("record %q fence %d, want the new owner's (fence %d)", d.Record.Result, d.Record.Fence, n.Fence)
	}
}

// releaseCounter wraps the Redis backend and counts Release calls. With
// ends set it says that a fenced script ends its leases (leasing.ScriptEnder).
type releaseCounter struct {
	lease.Backend
	releases atomic.Int32
}

func (b *releaseCounter) Release(ctx context.Context, name, token string, fence uint64) error {
	b.releases.Add(1)
	return b.Backend.Release(ctx, name, token, fence)
}

type scriptEndingCounter struct{ *releaseCounter }

func (scriptEndingCounter) EndsInScript() bool { return true }

// A Manager whose backend does not say that a script ends its leases (a
// wrapper here; Redlock in general) gets its leases released after the
// finishing script, one Release each; one that says so gets none.
func TestFinishWithoutScriptEnder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ends     bool
		releases int32
	}{
		{"release after the script", false, 1},
		{"ended by the script", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, prefix := testkit.SharedRedis(t)
			rc := &releaseCounter{Backend: lease.NewRedisBackend(c, prefix)}
			var b lease.Backend = rc
			if tc.ends {
				b = scriptEndingCounter{rc}
			}
			m, err := lease.NewManagerWithBackend(b, lease.WithTTL(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
			if leasing.EndsInScript(m) != tc.ends {
				t.Fatalf("EndsInScript = %v, want %v", leasing.EndsInScript(m), tc.ends)
			}
			s, err := New(t.Context(), c, m, WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			e := &env{s: s, m: m, c: c, prefix: prefix}
			for i, finish := range []func(cl *Claim) error{
				func(cl *Claim) error { return s.Complete(t.Context(), cl, []byte("r")) },
				func(cl *Claim) error { return s.Fail(t.Context(), cl, Retryable, nil) },
			} {
				rc.releases.Store(0)
				cl := e.claim(t, "k"+strconv.Itoa(i), fp("a"), Acquired)
				w := watchLost(cl.Lease)
				if err := finish(cl); err != nil {
					t.Fatalf("finish %d: %v", i, err)
				}
				if got := rc.releases.Load(); got != tc.releases {
					t.Errorf("finish %d: %d Release calls, want %d", i, got, tc.releases)
				}
				if n, _ := c.Exists(t.Context(), m.Key(cl.Lease.Name())).Result(); n != 0 {
					t.Errorf("finish %d: lease key left in Redis", i)
				}
				released(t, w, cl.Lease)
			}
		})
	}
}

// claimN acquires n keys named name/0 .. name/n-1 (spaces in name made
// dashes: keys hold no white space) and returns their claims, their leases
// and their lease keys.
func (e *env) claimN(t *testing.T, name string, n int) ([]*Claim, []*lease.Lease, []string) {
	t.Helper()
	var cs []*Claim
	var ls []*lease.Lease
	var keys []string
	for i := range n {
		c := e.claim(t, fmt.Sprintf("%s/%d", strings.ReplaceAll(name, " ", "-"), i), fp("a"), Acquired)
		cs, ls, keys = append(cs, c), append(ls, c.Lease), append(keys, e.m.Key(c.Lease.Name()))
	}
	return cs, ls, keys
}
