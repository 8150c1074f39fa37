package demo_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/paystub"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ttl = time.Second

// process is one worker: a lease manager, a compensation runner and the
// transfer logic, talking to Redis through its own client.
type process struct {
	m  *lease.Manager
	r  *compensation.Runner
	tr *demo.Transferer
}

// cutRedis returns a client of shared's server through a proxy the test can
// cut (the zombie's Redis), with short timeouts, closed at cleanup.
func cutRedis(t *testing.T, shared *redis.Client) (*testkit.Proxy, *redis.Client) {
	t.Helper()
	proxy := testkit.StartProxy(t, shared.Options().Addr)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: shared.Options().DB,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return proxy, c
}

// accountsDB returns a fresh PostgreSQL schema with the demo tables and the
// given accounts opened with their balances.
func accountsDB(t *testing.T, balances map[string]int64) *pgxpool.Pool {
	t.Helper()
	db := testkit.Postgres(t)
	if err := demo.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	for id, bal := range balances {
		if err := demo.OpenAccount(t.Context(), db, id, bal); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func newProcess(t *testing.T, c redis.UniversalClient, prefix string, tr *demo.Transferer, pay *paystub.Client) *process {
	t.Helper()
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg := compensation.NewRegistry()
	if err := demo.RegisterCompensations(reg, pay); err != nil {
		t.Fatal(err)
	}
	r, err := compensation.NewRunner(c, m, reg, compensation.WithPrefix(prefix),
		compensation.WithPollInterval(20*time.Millisecond), compensation.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
		_ = m.Shutdown(ctx)
	})
	return &process{m: m, r: r, tr: tr}
}

// takeOver acquires key's lease as soon as its holder's has expired, within
// limit, as a new owner does after a takeover.
func (p *process) takeOver(t *testing.T, key string, limit time.Duration) *lease.Lease {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		l, err := p.m.Acquire(t.Context(), key)
		if err == nil {
			return l
		}
		if !errors.Is(err, lease.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("new owner: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pausing is the zombie's job: it stops after its charge step, as a process
// paused by a GC, a stopped VM or a partition would, until resumed.
type pausing struct {
	*compensation.Journal
	charged chan struct{}
	resume  chan struct{}
}

func (p *pausing) Step(ctx context.Context, name string, do func(context.Context) error, comp string, args any) error {
	err := p.Journal.Step(ctx, name, do, comp, args)
	close(p.charged)
	<-p.resume
	return err
}

// TestZombieTransfer: a worker is cut off from Redis after charging; its
// lease expires and a new owner takes the transfer over. When the zombie
// resumes, its fenced PostgreSQL write is rejected, its charge has been
// refunded exactly once, and the new owner's charge and transfer stand.
func TestZombieTransfer(t *testing.T) {
	ctx := t.Context()
	shared, prefix := testkit.SharedRedis(t)
	proxy, zc := cutRedis(t, shared)

	db := accountsDB(t, map[string]int64{"alice": 1000, "bob": 0})
	stub := paystub.New()
	hs := httptest.NewServer(stub)
	t.Cleanup(hs.Close)
	pay := paystub.NewClient(hs.URL, hs.Client())
	tr := &demo.Transferer{DB: db, Pay: pay}
	zombie := newProcess(t, zc, prefix, tr, pay)
	owner := newProcess(t, shared, prefix, tr, pay)

	const key = "transfer-1"
	args := demo.TransferArgs{From: "alice", To: "bob", Amount: 100}
	zl, err := zombie.m.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	zj := &pausing{Journal: zombie.r.Journal(zl), charged: make(chan struct{}), resume: make(chan struct{})}
	zerr := make(chan error, 1)
	go func() { zerr <- zombie.tr.Run(ctx, zj, key, args) }()
	<-zj.charged

	// Partition the zombie from Redis: its renewals fail, the lease expires
	// in Redis, and the new owner takes the key over.
	proxy.Block()
	nl := owner.takeOver(t, key, 5*ttl)
	if nl.Fence() <= zl.Fence() {
		t.Fatalf("new fence %d not above the zombie's %d", nl.Fence(), zl.Fence())
	}
	// Takeover: compensate the previous fence's journal, then run again.
	if err := owner.r.CompensatePrevious(ctx, key, nl.Fence()); err != nil {
		t.Fatal(err)
	}
	nj := owner.r.Journal(nl)
	if err := owner.tr.Run(ctx, nj, key, args); err != nil {
		t.Fatal(err)
	}
	if err := nj.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nj.Close(ctx); err != nil { // the fenced commit landed
		t.Fatal(err)
	}

	// The zombie resumes where it was paused: its write carries an old fence.
	proxy.Unblock()
	close(zj.resume)
	err = <-zerr
	if !errors.Is(err, fence.ErrStaleFence) {
		t.Fatalf("zombie transfer: %v, want fence.ErrStaleFence", err)
	}
	// Its own trigger (write rejected, lease lost) finds the journal done.
	if err := zj.Compensate(ctx); err != nil {
		t.Fatal(err)
	}

	led := stub.Ledger()
	zch, _ := led.Charge(demo.ChargeID(key, zl.Fence()))
	nch, _ := led.Charge(demo.ChargeID(key, nl.Fence()))
	if !zch.Refunded || zch.RefundRequests != 1 {
		t.Errorf("zombie's charge %+v: want refunded, by exactly one request", zch)
	}
	if nch.Refunded || nch.Requests != 1 || nch.Amount != args.Amount {
		t.Errorf("new owner's charge %+v: want it to stand", nch)
	}
	if len(led.Charges) != 2 || led.RefundsApplied != 1 || led.RefundRequests != 1 {
		t.Errorf("ledger %+v: want 2 charges, 1 refund", led)
	}
	balances := map[string]int64{}
	rows, err := db.Query(ctx, `SELECT id, balance FROM demo_accounts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		balances[id] = b
	}
	if balances["alice"] != 900 || balances["bob"] != 100 {
		t.Errorf("balances %v: want the amount moved once", balances)
	}
	var wf int64
	if err := db.QueryRow(ctx, `SELECT fence FROM demo_transfers WHERE key = $1`, key).Scan(&wf); err != nil || uint64(wf) != nl.Fence() {
		t.Errorf("transfer row fence %d (%v), want the new owner's %d", wf, err, nl.Fence())
	}
	if cur, err := fence.Current(ctx, db, demo.Resource(key)); err != nil || cur != nl.Fence() {
		t.Errorf("fence of %s = %d (%v), want %d", demo.Resource(key), cur, err, nl.Fence())
	}
	if zl.Err() == nil || !errors.Is(zl.Err(), lease.ErrLost) {
		t.Errorf("zombie lease error %v, want lost", zl.Err())
	}
}

// TestZombieChargeAnsweredLate: the zombie's charge request is on its way
// when the zombie is cut off from Redis; a new owner takes over and
// compensates the zombie's in-doubt charge step (nothing to refund yet) and
// then the zombie's context is cancelled (lease lost) before the provider
// applies the charge. The zombie still waits for the provider's answer, so
// the journal learns of the late charge (compensation.ErrLateEffect) and the
// zombie's compensation refunds it: one charge stands, as if the zombie had
// never run.
func TestZombieChargeAnsweredLate(t *testing.T) {
	ctx := t.Context()
	shared, prefix := testkit.SharedRedis(t)
	proxy, zc := cutRedis(t, shared)
	db := accountsDB(t, map[string]int64{"alice": 1000, "bob": 0})
	// The provider holds the first charge request (the zombie's) until
	// released, then applies it whether or not the caller still waits.
	stub := paystub.New()
	arrived, release, applied := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var first sync.Once
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held := false
		if r.URL.Path == "/charges" {
			first.Do(func() { held = true })
		}
		if !held {
			stub.ServeHTTP(w, r)
			return
		}
		close(arrived)
		<-release
		stub.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
		close(applied)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	pay := paystub.NewClient(hs.URL, hs.Client())
	tr := &demo.Transferer{DB: db, Pay: pay}
	zombie := newProcess(t, zc, prefix, tr, pay)
	owner := newProcess(t, shared, prefix, tr, pay)

	const key = "transfer-late"
	args := demo.TransferArgs{From: "alice", To: "bob", Amount: 100}
	zl, err := zombie.m.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	zj := zombie.r.Journal(zl)
	zctx, loseLease := context.WithCancel(ctx)
	defer loseLease()
	zerr := make(chan error, 1)
	go func() { zerr <- zombie.tr.Run(zctx, zj, key, args) }()
	<-arrived // the charge's intent is journaled and its request sent

	proxy.Block()
	nl := owner.takeOver(t, key, 5*ttl)
	// The takeover compensates the zombie's step while it is in doubt: the
	// provider has no such charge yet.
	if err := owner.r.CompensatePrevious(ctx, key, nl.Fence()); err != nil {
		t.Fatal(err)
	}
	nj := owner.r.Journal(nl)
	if err := owner.tr.Run(ctx, nj, key, args); err != nil {
		t.Fatal(err)
	}
	if err := nj.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nj.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The zombie's worker notices the lost lease and cancels the job; then
	// the provider applies the charge it was holding.
	loseLease()
	proxy.Unblock()
	close(release)
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Fatal("the held charge was never applied")
	}
	err = <-zerr
	if !errors.Is(err, compensation.ErrLateEffect) {
		t.Fatalf("zombie transfer: %v, want compensation.ErrLateEffect (the charge landed after its compensation)", err)
	}
	// What the worker does after a lost lease: compensate the attempt.
	if err := zj.Compensate(ctx); err != nil {
		t.Fatal(err)
	}

	led := stub.Ledger()
	zch, ok := led.Charge(demo.ChargeID(key, zl.Fence()))
	if !ok || !zch.Refunded {
		t.Errorf("zombie's late charge %+v (found %v): want it refunded", zch, ok)
	}
	if nch, _ := led.Charge(demo.ChargeID(key, nl.Fence())); nch.Refunded || nch.Amount != args.Amount {
		t.Errorf("new owner's charge %+v: want it to stand", nch)
	}
	var alice int64
	if err := db.QueryRow(ctx, `SELECT balance FROM demo_accounts WHERE id = 'alice'`).Scan(&alice); err != nil || alice != 900 {
		t.Errorf("alice's balance %d (%v), want 900: moved once", alice, err)
	}
}

// losingJob runs its steps directly and, like a worker that finds its lease
// lost, cancels the job's context right after the charge step.
type losingJob struct {
	fence   uint64
	lose    context.CancelCauseFunc
	charged chan struct{}
}

func (j *losingJob) Fence() uint64 { return j.fence }

func (j *losingJob) Step(ctx context.Context, _ string, do func(context.Context) error, _ string, _ any) error {
	err := do(ctx)
	j.lose(errors.New("lease lost"))
	close(j.charged)
	return err
}

// TestHeldTransferIgnoresCancellation: a held transfer stalls for hold_ms
// between its charge and its write, ignoring the cancellation of its
// context (the lease lost meanwhile), and then really attempts its fenced
// write: refused when a newer owner wrote first, applied when none did. A
// transfer without a hold does not write once its context is cancelled.
func TestHeldTransferIgnoresCancellation(t *testing.T) {
	ctx := t.Context()
	db := accountsDB(t, map[string]int64{"a1": 1000, "b1": 1000, "a2": 1000, "b2": 1000, "a3": 1000, "b3": 1000})
	stub := paystub.New()
	hs := httptest.NewServer(stub)
	t.Cleanup(hs.Close)
	tr := &demo.Transferer{DB: db, Pay: paystub.NewClient(hs.URL, hs.Client())}
	balance := func(id string) int64 {
		t.Helper()
		var b int64
		if err := db.QueryRow(ctx, `SELECT balance FROM demo_accounts WHERE id = $1`, id).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// zombie starts the transfer under fence 1 with a context that is
	// cancelled after the charge; it returns once the charge is done.
	zombie := func(key string, a demo.TransferArgs) (<-chan error, time.Time) {
		jctx, lose := context.WithCancelCause(ctx)
		t.Cleanup(func() { lose(nil) })
		j := &losingJob{fence: 1, lose: lose, charged: make(chan struct{})}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- tr.Run(jctx, j, key, a) }()
		<-j.charged
		return done, start
	}

	// A newer owner writes during the zombie's hold: the zombie's write,
	// attempted after the hold, is refused by the fence guard.
	const hold = 700 * time.Millisecond
	a1 := demo.TransferArgs{From: "a1", To: "b1", Amount: 10, HoldMS: hold.Milliseconds()}
	done, start := zombie("held-stale", a1)
	owner := &losingJob{fence: 2, lose: func(error) {}, charged: make(chan struct{})}
	if err := tr.Run(ctx, owner, "held-stale", demo.TransferArgs{From: "a1", To: "b1", Amount: 10}); err != nil {
		t.Fatalf("new owner: %v", err)
	}
	err := <-done
	if took := time.Since(start); took < hold {
		t.Errorf("held transfer returned after %s, before its %s hold", took, hold)
	}
	var stale *fence.StaleError
	if !errors.As(err, &stale) || stale.Fence != 1 || stale.Current != 2 {
		t.Fatalf("held zombie: %v, want the fence guard's refusal of fence 1 (newest 2)", err)
	}
	if b := balance("a1"); b != 990 {
		t.Errorf("a1 balance %d, want 990 (moved once, by the new owner)", b)
	}

	// No newer owner: the held write lands although its context was
	// cancelled during the hold.
	done, _ = zombie("held-alone", demo.TransferArgs{From: "a2", To: "b2", Amount: 20, HoldMS: 50})
	if err := <-done; err != nil {
		t.Fatalf("held transfer with a cancelled context: %v, want its write applied", err)
	}
	if b := balance("b2"); b != 1020 {
		t.Errorf("b2 balance %d, want 1020", b)
	}

	// Without a hold, a cancelled context stops the write.
	done, _ = zombie("not-held", demo.TransferArgs{From: "a3", To: "b3", Amount: 30})
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("transfer with a cancelled context: %v, want context.Canceled", err)
	}
	if b := balance("a3"); b != 1000 {
		t.Errorf("a3 balance %d, want 1000 (nothing written)", b)
	}
}

func TestParseTransfer(t *testing.T) {
	if _, err := demo.ParseTransfer([]byte(`{"from":"a","to":"b","amount":5}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := demo.ParseTransfer([]byte(`{"from":"` + strings.Repeat("é", demo.MaxAccountLen/2) + `","to":"b c","amount":` +
		strconv.Itoa(demo.MaxAmount) + `}`)); err != nil {
		t.Errorf("longest account name and largest amount refused: %v", err)
	}
	for hold, want := range map[string]int64{``: 0, `,"hold_ms":0`: 0, `,"hold_ms":1`: 1, `,"hold_ms":60000`: demo.MaxHoldMS} {
		a, err := demo.ParseTransfer([]byte(`{"from":"a","to":"b","amount":5` + hold + `}`))
		if err != nil || a.HoldMS != want {
			t.Errorf("hold %q: %+v, %v; want hold_ms %d", hold, a, err, want)
		}
	}
	for _, bad := range []string{`-1`, `60001`, `1.5`, `"10"`, `9223372036854775808`} {
		_, err := demo.ParseTransfer([]byte(`{"from":"a","to":"b","amount":5,"hold_ms":` + bad + `}`))
		if !errors.Is(err, demo.ErrInvalidTransfer) {
			t.Errorf("hold_ms %s: err %v, want ErrInvalidTransfer", bad, err)
		}
		if bad == `60001` && (err == nil || !strings.Contains(err.Error(), "hold_ms 60001 outside 0..60000")) {
			t.Errorf("hold_ms 60001: error %v does not name the field and its bound", err)
		}
	}
	long := strings.Repeat("a", demo.MaxAccountLen+1)
	for _, bad := range []string{`{}`, `{"from":"a","to":"a","amount":5}`, `{"from":"a","to":"b","amount":0}`, `x`,
		`{"from":"a\u0000","to":"b","amount":1}`, `{"from":"a","to":"b\n","amount":1}`, `{"from":"a\u007f","to":"b","amount":1}`,
		`{"from":"a\u200b","to":"b","amount":1}`, `{"from":"a","to":"\u0085b","amount":1}`, "{\"from\":\"\xff\",\"to\":\"b\",\"amount\":1}",
		`{"from":"` + long + `","to":"b","amount":1}`, `{"from":"a","to":"b","amount":` + strconv.Itoa(demo.MaxAmount+1) + `}`,
	} {
		if _, err := demo.ParseTransfer([]byte(bad)); !errors.Is(err, demo.ErrInvalidTransfer) {
			t.Errorf("ParseTransfer(%q) err %v, want ErrInvalidTransfer", bad, err)
		}
	}
}

// TestRefundRetriedAndDeadLettered: the provider refuses refunds for a while.
// A short outage is ridden out by retries with backoff; a long one ends in
// the dead-letter list, and Retry refunds once the provider is back.
func TestRefundRetriedAndDeadLettered(t *testing.T) {
	ctx := t.Context()
	shared, prefix := testkit.SharedRedis(t)
	db := accountsDB(t, map[string]int64{"alice": 1000, "bob": 0})
	stub := paystub.New()
	hs := httptest.NewServer(stub)
	t.Cleanup(hs.Close)
	pay := paystub.NewClient(hs.URL, hs.Client())
	p := newProcess(t, shared, prefix, &demo.Transferer{DB: db, Pay: pay}, pay)
	args := demo.TransferArgs{From: "alice", To: "bob", Amount: 7}

	// charge runs the charge step of a transfer under a fresh lease and
	// returns its journal (the job then fails terminally).
	charge := func(key string) *compensation.Journal {
		l, err := p.m.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		j := p.r.Journal(l)
		id := demo.ChargeID(key, l.Fence())
		if err := j.Step(ctx, "charge", func(ctx context.Context) error { return pay.Charge(ctx, id, args.From, args.Amount) },
			demo.RefundHandler, demo.RefundArgs{ChargeID: id}); err != nil {
			t.Fatal(err)
		}
		return j
	}

	stub.FailRefunds(3)
	j1 := charge("short-outage")
	if err := j1.Compensate(ctx); err != nil {
		t.Fatalf("compensate through a 3-failure outage: %v", err)
	}
	led := stub.Ledger()
	if led.FailedRefunds != 3 || led.RefundsApplied != 1 {
		t.Fatalf("ledger %+v: want 3 refused refunds then 1 applied", led)
	}

	stub.FailRefunds(1 << 30)
	j2 := charge("long-outage")
	err := j2.Compensate(ctx)
	if !errors.Is(err, compensation.ErrDeadLettered) || !errors.Is(err, paystub.ErrUnavailable) {
		t.Fatalf("compensate through a long outage: %v, want dead-lettered with the provider's error", err)
	}
	list, err := p.r.List(ctx, 10)
	if err != nil || len(list) != 1 || list[0].Ref != j2.Ref() {
		t.Fatalf("dead letters %+v, %v", list, err)
	}
	stub.FailRefunds(0) // the provider is back
	if n, err := p.r.Retry(ctx, "long-outage"); n != 1 || err != nil {
		t.Fatalf("Retry = %d, %v", n, err)
	}
	ch, _ := stub.Ledger().Charge(demo.ChargeID("long-outage", j2.Fence()))
	if !ch.Refunded {
		t.Errorf("charge %+v not refunded after retry", ch)
	}
	if list, err := p.r.List(ctx, 10); err != nil || len(list) != 0 {
		t.Errorf("dead letters after retry: %+v, %v", list, err)
	}
}
