package leasehold

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// crashable returns an option that lets crash stop the worker built with
// it, and the switch that crash turns: from then on, its commits are dropped.
func crashable() (Opt, *crashSwitch) {
	sw := &crashSwitch{}
	return withCommit(func(ctx context.Context, cl *kgo.Client) error {
		sw.mu.RLock()
		defer sw.mu.RUnlock()
		if sw.crashed.Load() {
			return nil // a crash loses what was not committed yet
		}
		return cl.CommitMarkedOffsets(ctx)
	}), sw
}

// crashSwitch drops a crashable worker's commits once turned.
type crashSwitch struct {
	mu      sync.RWMutex // held for reading by each commit
	crashed atomic.Bool
}

// freeze drops every later commit and waits out the one in flight, if any:
// from its return on, the worker's committed offsets no longer move.
func (sw *crashSwitch) freeze() {
	sw.crashed.Store(true)
	sw.mu.Lock()
	defer sw.mu.Unlock()
}

// crash stops w, built with crashable's option, like a process that dies
// after its running jobs finished but before its offsets were committed:
// every record it finished since its last commit is delivered again to the
// partition's next owner.
func crash(t *testing.T, w *Worker, sw *crashSwitch) {
	t.Helper()
	sw.freeze()
	w.offs.removeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatalf("crash shutdown: %v", err)
	}
}

// position is one record's place in its topic.
type position struct {
	partition int32
	offset    int64
}

// finishedUncommitted lists the records w finished whose offsets are not
// committed yet: what a crash now would deliver again.
func finishedUncommitted(w *Worker) []position {
	committed := w.cl.CommittedOffsets()
	w.offs.mu.Lock()
	defer w.offs.mu.Unlock()
	var out []position
	for tp, pt := range w.offs.parts {
		from := pt.first
		if eo, ok := committed[tp.topic][tp.partition]; ok && eo.Offset >= 0 {
			from = eo.Offset
		}
		for o := from; o < pt.marked; o++ {
			out = append(out, position{tp.partition, o})
		}
	}
	return out
}

// positionLog records the positions of the records a worker claimed, once on.
type positionLog struct {
	on  atomic.Bool
	mu  sync.Mutex
	pos map[position]bool
}

func (l *positionLog) hooks() Hooks {
	return Hooks{OnClaim: func(_ context.Context, i ClaimInfo) {
		if l.on.Load() {
			l.mu.Lock()
			l.pos[position{i.Partition, i.Offset}] = true
			l.mu.Unlock()
		}
	}}
}

// TestExactlyOnceUnderDuplicatesAndRedelivery sends 10,000 jobs plus 20%
// duplicates and a set of poison records through three workers of one group.
// One worker "crashes" with nothing committed, so every offset it finished is
// delivered again; a fourth joins. Every job's effect must happen exactly
// once, offsets must be committed to the end, and the dead-letter topic must
// hold exactly the poison records.
func TestExactlyOnceUnderDuplicatesAndRedelivery(t *testing.T) {
	h := setup(t, 6)
	const (
		jobs       = 10000
		dups       = jobs / 5
		noKey      = 7
		unknown    = 5
		permanent  = 6
		mismatched = 4
	)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []*kgo.Record
	payload := func(i int) []byte { return []byte(`{"n":` + strconv.Itoa(i) + `}`) }
	wantDLQ := map[string]string{} // dead-letter identity -> reason
	for i := range jobs {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.op", Key: fmt.Sprintf("job-%05d", i), Payload: payload(i)}))
	}
	// Duplicates, each placed after its original.
	for range dups {
		i := rng.IntN(jobs)
		recs = append(recs, jobRecord(t, NewJob{Type: "test.op", Key: fmt.Sprintf("job-%05d", i), Payload: payload(i)}))
	}
	for i := range permanent {
		k := fmt.Sprintf("poison-%d", i)
		recs = append(recs, jobRecord(t, NewJob{Type: "test.op", Key: k, Payload: []byte("poison")}))
		wantDLQ[k] = ReasonPermanent
	}
	for i := range unknown {
		k := fmt.Sprintf("unknown-%d", i)
		recs = append(recs, jobRecord(t, NewJob{Type: "test.nobody", Key: k}))
		wantDLQ[k] = ReasonUnknownType
	}
	for i := range noKey {
		v := fmt.Sprintf("nokey-%d", i)
		recs = append(recs, &kgo.Record{Key: []byte(v), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: HeaderType, Value: []byte("test.op")}}})
		wantDLQ[v] = ReasonMissingKey
	}
	for i := range mismatched {
		k := fmt.Sprintf("job-%05d", i*100)
		recs = append(recs, jobRecord(t, NewJob{Type: "test.op", Key: k, Payload: []byte(`{"other":true}`)}))
		wantDLQ[k+"/mismatch"] = ReasonMismatch
	}
	// Interleave the tail (duplicates and poison) into the second half of
	// the stream so that they arrive while the originals are in flight.
	tail := recs[jobs:]
	head := recs[:jobs]
	mixed := append([]*kgo.Record(nil), head[:jobs/2]...)
	rest := append(append([]*kgo.Record(nil), head[jobs/2:]...), tail...)
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	mixed = append(mixed, rest...)
	sortOriginalsFirst(mixed, payload)

	fx := newEffects()
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		if string(j.Payload) == "poison" {
			return nil, Permanent(errors.New("poison payload"))
		}
		fx.add(j.Key)
		return []byte("ok:" + j.Key), nil
	}
	reg := func(w *Worker) { must(t, w.Register("test.op", handler)) }
	h.produce(t, mixed)

	// w1 commits nothing by itself (only on a rebalance); the others log
	// what they claim after the crash.
	w1claims, reclaims := &positionLog{pos: map[position]bool{}}, &positionLog{pos: map[position]bool{}}
	w1claims.on.Store(true)
	crashOpt, crashed := crashable()
	// A handler whose lease was lost (its renewals starved on a loaded
	// machine past the 2s TTL) may have had its effect before another
	// worker ran the job again: that is at-least-once for an unfenced
	// effect, as documented. Each such attempt excuses one more effect of
	// its key; duplicates and redelivery must excuse none.
	var lostMu sync.Mutex
	lost := map[string]int{}
	lostHooks := WithHooks(Hooks{OnLeaseLost: func(_ context.Context, j *Job, _ error) {
		lostMu.Lock()
		lost[j.Key]++
		lostMu.Unlock()
	}})
	w1 := h.start(t, h.rdb, reg, WithConcurrency(8), WithCommitInterval(time.Hour), WithHooks(w1claims.hooks()), crashOpt, lostHooks)
	w2 := h.start(t, h.rdb, reg, WithConcurrency(8), WithHooks(reclaims.hooks()), lostHooks)
	w3 := h.start(t, h.rdb, reg, WithConcurrency(8), WithHooks(reclaims.hooks()), lostHooks)
	done := func() int {
		s := fx.snapshot()
		return len(s)
	}
	// Crash w1 once it holds at least 50 finished, uncommitted records
	// (jobs it claimed and ran): their redelivery is the scenario. Its
	// commits are frozen before they are counted, so that a commit in
	// flight (a rebalance's) cannot land after the count.
	// The waits fail when the jobs stop moving, not after a fixed time: under
	// -race beside other work, 10,000 jobs take from seconds to minutes.
	var pending []position
	testkit.Progressing(t, 30*time.Second, "a third of the jobs, 50 of them finished by w1 and not committed", func() (int, bool) {
		n := done()
		if n < jobs/3 {
			return n, false
		}
		count := func() int {
			pending = pending[:0]
			w1claims.mu.Lock()
			defer w1claims.mu.Unlock()
			for _, p := range finishedUncommitted(w1) {
				if w1claims.pos[p] {
					pending = append(pending, p)
				}
			}
			return len(pending)
		}
		if count() < 50 {
			return n, false
		}
		crashed.freeze() // w1 runs on, committing nothing
		return n, count() >= 50
	})
	before := w1.Stats().Succeeded
	reclaims.on.Store(true)
	crash(t, w1, crashed)
	w4 := h.start(t, h.rdb, reg, WithConcurrency(8), WithHooks(reclaims.hooks()), lostHooks)

	testkit.Progressing(t, 30*time.Second, "every job's effect", func() (int, bool) { n := done(); return n, n >= jobs })
	h.waitCommitted(t, 30*time.Second)

	// Every record w1 claimed and finished but did not commit was delivered
	// again and claimed by another worker (as a duplicate: its effect
	// happened once, checked below).
	reclaims.mu.Lock()
	for _, p := range pending {
		if !reclaims.pos[p] {
			t.Errorf("record %d/%d, finished by the crashed worker and not committed, was not claimed again", p.partition, p.offset)
		}
	}
	reclaims.mu.Unlock()
	lostMu.Lock()
	excused := 0
	for i := range jobs {
		k := fmt.Sprintf("job-%05d", i)
		n := fx.count(k)
		if n < 1 || n > 1+lost[k] {
			t.Errorf("effect of %s happened %d times, want 1 (or up to %d: %d attempts lost their lease)", k, n, 1+lost[k], lost[k])
		}
		if n > 1 {
			excused++
		}
	}
	lostMu.Unlock()
	t.Logf("keys whose effect ran again after an attempt lost its lease: %d", excused)
	for i := range permanent {
		if n := fx.count(fmt.Sprintf("poison-%d", i)); n != 0 {
			t.Errorf("poison job had an effect %d times", n)
		}
	}

	got := map[string]string{}
	origins := map[string]string{}
	for _, r := range h.kafka.ReadAll(t, h.dlq) {
		id := keyOf(r)
		reason := string(headerValue(r.Headers, HeaderDLQReason))
		switch {
		case id == "":
			id = string(r.Value)
		case reason == ReasonMismatch:
			id += "/mismatch"
		}
		origin := string(headerValue(r.Headers, HeaderDLQPartition)) + "/" + string(headerValue(r.Headers, HeaderDLQOffset))
		if _, dup := origins[id]; dup {
			// Redelivery after the crash must find the marker the crashed
			// worker stored and not write a second copy.
			t.Errorf("dead-lettered twice: %s (origin %s)", id, origin)
		}
		origins[id] = origin
		got[id] = reason
		if string(headerValue(r.Headers, HeaderDLQTopic)) != h.topic || headerValue(r.Headers, HeaderDLQOffset) == nil {
			t.Errorf("dead letter %s lacks its origin headers", id)
		}
	}
	if diff := cmp.Diff(wantDLQ, got); diff != "" {
		t.Errorf("dead-letter topic (-want +got):\n%s", diff)
	}

	var replayed int64
	for _, w := range []*Worker{w1, w2, w3, w4} {
		replayed += w.Stats().Replayed
	}
	if replayed < dups {
		t.Errorf("replayed %d duplicates, want at least %d", replayed, dups)
	}
	t.Logf("crashed worker finished %d jobs, %d of its records were redelivered; duplicates replayed: %d", before, len(pending), replayed)
}

// sortOriginalsFirst reorders recs so that, for every key, the record
// carrying the original payload comes before any other record of that key,
// keeping the relative order otherwise.
func sortOriginalsFirst(recs []*kgo.Record, payload func(int) []byte) {
	isOriginal := func(r *kgo.Record) bool {
		var n int
		if _, err := fmt.Sscanf(keyOf(r), "job-%05d", &n); err != nil {
			return true
		}
		return string(r.Value) == string(payload(n))
	}
	seen := map[string]bool{}
	var deferred []*kgo.Record
	out := recs[:0:0]
	for _, r := range recs {
		k := keyOf(r)
		if k == "" || seen[k] || isOriginal(r) {
			if k != "" && isOriginal(r) && !seen[k] {
				seen[k] = true
				out = append(out, r)
				// release the copies waiting for this original
				kept := deferred[:0]
				for _, d := range deferred {
					if keyOf(d) == k {
						out = append(out, d)
					} else {
						kept = append(kept, d)
					}
				}
				deferred = kept
				continue
			}
			out = append(out, r)
			continue
		}
		deferred = append(deferred, r)
	}
	out = append(out, deferred...)
	copy(recs, out)
}
