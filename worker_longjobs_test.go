package leasehold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// sleeper is a handler that runs for d in steps, heartbeating after each,
// and counts its effect at the end unless its context was cancelled.
func sleeper(fx *effects, d time.Duration, steps int) Handler {
	return func(ctx context.Context, j *Job) ([]byte, error) {
		for i := range steps {
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(d / time.Duration(steps)):
			}
			if err := j.Heartbeat(ctx, []byte(fmt.Sprint(i+1))); err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		fx.add(j.Key)
		return []byte("slept"), nil
	}
}

// TestLongJobsWhileMembersJoinAndLeave runs jobs lasting several lease TTLs
// while a worker joins the group and another leaves. Partitions move while
// jobs run; the new owners re-read uncommitted records, find their keys held,
// wait, and replay the result. Nothing is lost, nothing runs twice.
func TestLongJobsWhileMembersJoinAndLeave(t *testing.T) {
	const partitions = 6
	h := setup(t, partitions)
	const jobs = 2 * partitions
	ttl := 1500 * time.Millisecond
	fx := newEffects()
	// Every partition p holds long-p, its duplicate right behind (found
	// held while the original runs) and long-(p+6): whichever partitions
	// move, they carry records whose jobs run.
	var recs []*kgo.Record
	for p := range int32(partitions) {
		for _, i := range []int32{p, p, p + partitions} {
			r := jobRecord(t, NewJob{Type: "test.long", Key: fmt.Sprintf("long-%02d", i)})
			r.Topic, r.Partition = h.topic, p
			recs = append(recs, r)
		}
	}
	dups := partitions
	claims := &recordClaims{}
	reg := func(w *Worker) { must(t, w.Register("test.long", sleeper(fx, 4*ttl+time.Second, 20))) }
	opts := func(name string) []Opt {
		return []Opt{WithLeaseTTL(ttl), WithConcurrency(jobs), WithHeartbeatThrottle(200 * time.Millisecond),
			WithHooks(Hooks{OnClaim: func(_ context.Context, c ClaimInfo) { claims.add(name, c) }})}
	}
	a := h.start(t, h.rdb, reg, opts("a")...)
	b := h.start(t, h.rdb, reg, opts("b")...)
	asg := groupAssignments(t, h, partitions)
	var bBefore []int32
	testkit.Eventually(t, 30*time.Second, "a and b assigned every partition", func() bool {
		m, ok := asg()
		bBefore = m[memberOf(b)]
		return ok && len(m) == 2 && len(m[memberOf(a)]) > 0 && len(bBefore) > 0
	})

	cl := h.kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	testkit.Eventually(t, 20*time.Second, "every job running, on both workers", func() bool {
		return len(a.Running())+len(b.Running()) == jobs && len(a.Running()) > 0 && len(b.Running()) > 0
	})

	c := h.start(t, h.rdb, reg, opts("c")...) // joins: partitions move while jobs run
	var bLast []int32
	testkit.Eventually(t, 30*time.Second, "c assigned partitions, one of them revoked from b", func() bool {
		m, ok := asg()
		bLast = m[memberOf(b)]
		return ok && len(m) == 3 && len(m[memberOf(c)]) > 0 && len(bLast) > 0 && len(bLast) < len(bBefore)
	})
	if len(b.Running()) == 0 {
		t.Fatal("b's jobs finished before the rebalance; the jobs are too short for this test")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := b.Shutdown(sctx); err != nil { // leaves, draining its jobs under their leases
		t.Fatalf("shutdown of the leaving worker: %v", err)
	}
	testkit.Eventually(t, 30*time.Second, "b's partitions assigned to a and c", func() bool {
		m, ok := asg()
		if !ok || len(m) != 2 || len(m[memberOf(a)]) == 0 || len(m[memberOf(c)]) == 0 {
			return false
		}
		return len(m[memberOf(a)])+len(m[memberOf(c)]) == partitions
	})

	testkit.Eventually(t, 60*time.Second, "every job done", func() bool { return len(fx.snapshot()) == jobs })
	h.waitCommitted(t, 30*time.Second)
	for i := range jobs {
		if n := fx.count(fmt.Sprintf("long-%02d", i)); n != 1 {
			t.Errorf("long-%02d ran to completion %d times, want 1", i, n)
		}
	}
	var held, replayed, lost int64
	for _, w := range []*Worker{a, b, c} {
		s := w.Stats()
		held += s.Claimed[OutcomeHeld]
		replayed += s.Replayed
		lost += s.LeasesLost
	}
	if lost != 0 {
		t.Errorf("%d leases lost; heartbeating jobs must keep theirs", lost)
	}
	if replayed < int64(dups) {
		t.Errorf("replayed %d, want at least %d (one per duplicate)", replayed, dups)
	}

	// The join: c re-read records of the partition it took from b while
	// b ran their jobs, found their keys held, and replayed b's results.
	movedHeld, movedReplayed := 0, 0
	for _, r := range claims.records() {
		if !slices.Contains(bBefore, r.partition) || slices.Contains(bLast, r.partition) || !r.by("b", OutcomeAcquired) {
			continue
		}
		if r.by("c", OutcomeHeld) {
			movedHeld++
		}
		if r.by("c", OutcomeDuplicate) {
			movedReplayed++
		}
	}
	if movedHeld == 0 || movedReplayed == 0 {
		t.Errorf("of the records b ran on the partitions c took from it, c found %d held and replayed %d; want some of each",
			movedHeld, movedReplayed)
	}
	// The leave: a and c re-read what b had left uncommitted on the
	// partitions it owned when it left.
	reread := 0
	for _, r := range claims.records() {
		if slices.Contains(bLast, r.partition) && r.byAny("b") && (r.byAny("a") || r.byAny("c")) {
			reread++
		}
	}
	if reread == 0 {
		t.Errorf("no record b claimed on its last partitions %v was claimed again by a or c after it left", bLast)
	}
	t.Logf("held answers %d, replays %d; b's partitions %v, %v after c joined; moved from b to c: %d held, %d replayed; re-read after b left: %d",
		held, replayed, bBefore, bLast, movedHeld, movedReplayed, reread)
}

// recordClaims records which worker answered which claim of each record.
type recordClaims struct {
	mu   sync.Mutex
	recs map[[2]int64]*claimedRecord
}

type claimedRecord struct {
	partition int32
	offset    int64
	answers   []claimAnswer
}

type claimAnswer struct {
	worker  string
	outcome Outcome
}

func (l *recordClaims) add(worker string, c ClaimInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recs == nil {
		l.recs = map[[2]int64]*claimedRecord{}
	}
	k := [2]int64{int64(c.Partition), c.Offset}
	r := l.recs[k]
	if r == nil {
		r = &claimedRecord{partition: c.Partition, offset: c.Offset}
		l.recs[k] = r
	}
	r.answers = append(r.answers, claimAnswer{worker, c.Outcome})
}

func (l *recordClaims) records() []claimedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]claimedRecord, 0, len(l.recs))
	for _, r := range l.recs {
		out = append(out, claimedRecord{r.partition, r.offset, slices.Clone(r.answers)})
	}
	return out
}

// by reports whether worker answered a claim of the record with outcome.
func (r claimedRecord) by(worker string, outcome Outcome) bool {
	return slices.Contains(r.answers, claimAnswer{worker, outcome})
}

// byAny reports whether worker answered a claim of the record.
func (r claimedRecord) byAny(worker string) bool {
	return slices.ContainsFunc(r.answers, func(a claimAnswer) bool { return a.worker == worker })
}

// memberOf returns w's current member ID in its consumer group.
func memberOf(w *Worker) string {
	m, _ := w.Client().GroupMetadata()
	return m
}

// groupAssignments returns a reader of h's group: the partitions of h's
// topic assigned to each member, and whether the group is stable with
// all its partitions assigned.
func groupAssignments(t *testing.T, h *harness, partitions int) func() (map[string][]int32, bool) {
	t.Helper()
	adm := kadm.NewClient(h.kafka.Client(t))
	return func() (map[string][]int32, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		described, err := adm.DescribeGroups(ctx, h.group)
		if err != nil {
			return nil, false
		}
		g := described[h.group]
		if g.Err != nil || g.State != "Stable" {
			return nil, false
		}
		out := map[string][]int32{}
		n := 0
		for _, m := range g.Members {
			c, ok := m.Assigned.AsConsumer()
			if !ok || c == nil {
				return nil, false
			}
			for _, tp := range c.Topics {
				if tp.Topic == h.topic {
					out[m.MemberID] = append(out[m.MemberID], tp.Partitions...)
					n += len(tp.Partitions)
				}
			}
		}
		return out, n == partitions
	}
}

// TestRedisDownPausesConsumption stops Redis (SIGSTOP) for five seconds in
// the middle of a run: no handler may start from a claim made while it is
// down, and every job must be completed, once, after it comes back.
func TestRedisDownPausesConsumption(t *testing.T) {
	h := setup(t, 4)
	srv := testkit.StartRedis(t)
	opt := srv.Options()
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = 200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })

	const jobs = 60
	type start struct {
		at    time.Time
		fence uint64 // Redis time of the claim, in microseconds (the claim script's fence)
	}
	var (
		mu      sync.Mutex
		starts  []start
		commits = newEffects()
	)
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		mu.Lock()
		starts = append(starts, start{time.Now(), j.fence})
		mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(300 * time.Millisecond):
		}
		return nil, nil
	}
	hooks := Hooks{OnDone: func(_ context.Context, j *Job, _ []byte, err error) {
		if err == nil {
			commits.add(j.Key)
		}
	}}
	reg := func(w *Worker) { must(t, w.Register("test.op", handler)) }
	opts := []Opt{WithLeaseTTL(time.Second), WithConcurrency(4), WithHooks(hooks)}
	w1 := h.start(t, rdb, reg, opts...)
	w2 := h.start(t, rdb, reg, opts...)
	var recs []*kgo.Record
	for i := range jobs {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.op", Key: fmt.Sprintf("r-%02d", i)}))
	}
	h.produce(t, recs)
	testkit.Eventually(t, 20*time.Second, "a few jobs done", func() bool { return len(commits.snapshot()) >= 8 })

	srv.Pause()
	downAt := time.Now()
	var notReady atomic.Bool
	go func() {
		time.Sleep(2 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		notReady.Store(w1.Ready(ctx) != nil)
	}()
	time.Sleep(5 * time.Second)
	upAt := time.Now()
	srv.Resume()

	testkit.Eventually(t, 60*time.Second, "every job completed", func() bool { return len(commits.snapshot()) == jobs })
	h.waitCommitted(t, 30*time.Second)

	mu.Lock()
	defer mu.Unlock()
	// A claim answered just before the pause may start its handler after
	// it (on a loaded machine, well after): what must not happen is a
	// handler whose claim Redis made while stopped. A fresh claim's fence
	// is Redis's clock (the same machine's) in microseconds when it ran.
	during := 0
	for _, s := range starts {
		if s.at.After(downAt) && s.at.Before(upAt) {
			during++
			if claimed := time.UnixMicro(int64(s.fence)); !claimed.Before(downAt) { //nolint:gosec // a fence is a microsecond timestamp
				t.Errorf("a handler started %v after Redis went down from a claim made %v after it",
					s.at.Sub(downAt), claimed.Sub(downAt))
			}
		}
	}
	t.Logf("handlers started while Redis was down, from claims made before: %d", during)
	for i := range jobs {
		if n := commits.count(fmt.Sprintf("r-%02d", i)); n != 1 {
			t.Errorf("r-%02d completed %d times, want 1", i, n)
		}
	}
	if !notReady.Load() {
		t.Error("Ready reported ready while Redis was down")
	}
	if p := w1.Stats().Pauses + w2.Stats().Pauses; p == 0 {
		t.Error("no worker paused fetching while Redis was down")
	}
}

// TestShutdownDrainsRunningJobs: jobs shorter than the drain timeout finish
// and their offsets are committed.
func TestShutdownDrainsRunningJobs(t *testing.T) {
	h := setup(t, 2)
	fx := newEffects()
	var cancelled atomic.Int32
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		select {
		case <-ctx.Done():
			cancelled.Add(1)
			return nil, context.Cause(ctx)
		case <-time.After(1500 * time.Millisecond):
		}
		fx.add(j.Key)
		return nil, nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.op", handler)) }, WithConcurrency(8))
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.op", Key: fmt.Sprintf("d-%d", i)}))
	}
	h.produce(t, recs)
	testkit.Eventually(t, 20*time.Second, "all jobs running", func() bool { return len(w.Running()) == 6 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := len(fx.snapshot()); n != 6 || cancelled.Load() != 0 {
		t.Fatalf("after a drained shutdown: %d of 6 done, %d cancelled", n, cancelled.Load())
	}
	end := h.kafka.EndOffsets(t, h.topic)
	got := h.kafka.Committed(t, h.group, h.topic)
	for p, e := range end {
		if got[p] != e {
			t.Errorf("partition %d committed %d, want %d", p, got[p], e)
		}
	}
}

// TestShutdownCancelsJobsPastTheDrainTimeout: jobs still running when the
// drain timeout passes are cancelled with ErrLeaseLost (ErrShutdown), their
// lost-lease hooks run, and their offsets stay uncommitted.
func TestShutdownCancelsJobsPastTheDrainTimeout(t *testing.T) {
	h := setup(t, 1)
	causes := make(chan error, 8)
	var lostHooks atomic.Int32
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.op", handler)) },
		WithConcurrency(4), WithShutdownTimeout(500*time.Millisecond),
		WithHooks(Hooks{OnLeaseLost: func(context.Context, *Job, error) { lostHooks.Add(1) }}))
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.op", Key: fmt.Sprintf("c-%d", i)}))
	}
	h.produce(t, recs)
	testkit.Eventually(t, 20*time.Second, "jobs running", func() bool { return len(w.Running()) == 3 })
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v with a 500ms drain timeout", d)
	}
	close(causes)
	n := 0
	for c := range causes {
		n++
		if !errors.Is(c, ErrLeaseLost) || !errors.Is(c, ErrShutdown) {
			t.Errorf("job cancelled with %v, want ErrShutdown matching ErrLeaseLost", c)
		}
	}
	if n != 3 || lostHooks.Load() != 3 {
		t.Errorf("%d handlers cancelled, %d lost-lease hooks; want 3 and 3", n, lostHooks.Load())
	}
	if got := h.kafka.Committed(t, h.group, h.topic)[0]; got > 0 {
		t.Errorf("committed offset %d for jobs that did not finish", got)
	}
}
