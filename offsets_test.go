package leasehold

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestOffsetsMarkOnlyContiguousPrefix(t *testing.T) {
	t.Parallel()
	var marks []int64
	o := newOffsets(func(m map[string]map[int32]kgo.EpochOffset) {
		marks = append(marks, m["t"][0].Offset)
	})
	rec := func(off int64) *kgo.Record { return &kgo.Record{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: 3} }
	var tr *partTracker
	for _, off := range []int64{10, 11, 13, 14} { // 12 compacted away
		var ok bool
		tr, ok = o.track(rec(off))
		if !ok {
			t.Fatalf("track(%d) refused", off)
		}
	}
	if _, ok := o.track(rec(11)); ok {
		t.Fatal("a re-fetched offset was tracked twice")
	}
	o.done(tr, 13)
	o.done(tr, 14)
	if len(marks) != 0 {
		t.Fatalf("marked %v while offset 10 is in flight", marks)
	}
	o.done(tr, 10)
	o.done(tr, 11)
	if diff := cmp.Diff([]int64{11, 15}, marks); diff != "" {
		t.Fatalf("marks (-want +got):\n%s", diff)
	}
	if n := o.inFlight(); n != 0 {
		t.Fatalf("inFlight = %d, want 0", n)
	}
}

func TestOffsetsNoMarkAfterRevoke(t *testing.T) {
	t.Parallel()
	marked := 0
	o := newOffsets(func(map[string]map[int32]kgo.EpochOffset) { marked++ })
	tr, _ := o.track(&kgo.Record{Topic: "t", Partition: 2, Offset: 0})
	o.remove(map[string][]int32{"t": {2}})
	if o.alive(tr) {
		t.Fatal("tracker alive after revoke")
	}
	o.done(tr, 0)
	if marked != 0 {
		t.Fatalf("a finished record of a revoked partition was marked")
	}
	// A new assignment of the same partition starts a new tracker.
	tr2, ok := o.track(&kgo.Record{Topic: "t", Partition: 2, Offset: 0})
	if !ok || tr2 == tr {
		t.Fatal("re-assigned partition did not get a fresh tracker")
	}
	o.done(tr2, 0)
	if marked != 1 {
		t.Fatalf("marked = %d, want 1", marked)
	}
}

func TestScheduleOrderedKeys(t *testing.T) {
	t.Parallel()
	s := newSchedule(true, func() {})
	mk := func(off int64) *delivery {
		return &delivery{rec: &kgo.Record{Offset: off}, orderKey: "k"}
	}
	a, b, c := mk(1), mk(2), mk(3)
	if !s.admit(a) {
		t.Fatal("first record of a key must be admitted")
	}
	if s.admit(b) || s.admit(c) {
		t.Fatal("records behind a busy key must queue")
	}
	s.finished(a)
	got := s.takeDue(10, b.due)
	if len(got) != 1 || got[0] != b {
		t.Fatalf("after the first finished, want the second ready, got %d", len(got))
	}
	s.finished(b)
	if got := s.takeDue(10, c.due); len(got) != 1 || got[0] != c {
		t.Fatal("third record not released in order")
	}
	s.finished(c)
	if n := s.len(); n != 0 {
		t.Fatalf("schedule holds %d, want 0", n)
	}
}

// TestOffsetsBoundedBehindLongHead: a million records finish behind one
// that does not (a long job at the partition's head); the tracker keeps
// the finished ones as one run, so its entries stay bounded by the records
// in flight, and the head's end marks the whole run at once.
func TestOffsetsBoundedBehindLongHead(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	var marks []int64
	o := newOffsets(func(m map[string]map[int32]kgo.EpochOffset) { marks = append(marks, m["t"][0].Offset) })
	var tr *partTracker
	maxCap := 0
	for off := int64(0); off <= n; off++ {
		tr, _ = o.track(&kgo.Record{Topic: "t", Partition: 0, Offset: off, Value: make([]byte, 10)})
		if off > 0 {
			o.done(tr, off)
		}
		maxCap = max(maxCap, cap(tr.queue))
	}
	if maxCap > 8 {
		t.Errorf("the tracker's queue reached a capacity of %d entries for 1 unfinished record", maxCap)
	}
	if got := o.inFlight(); got != 1 {
		t.Errorf("inFlight = %d, want 1", got)
	}
	if h, _ := o.weight(); h.records != 1 || h.bytes != 10 {
		t.Errorf("held = %+v, want 1 record of 10 bytes", h)
	}
	if len(marks) != 0 {
		t.Fatalf("marked %v while offset 0 is in flight", marks)
	}
	o.done(tr, 0)
	if diff := cmp.Diff([]int64{n + 1}, marks); diff != "" {
		t.Fatalf("marks (-want +got):\n%s", diff)
	}
	if tr.queue != nil {
		t.Errorf("queue = %v after every record finished, want nil", tr.queue)
	}
}

// TestOffsetsMarksMatchModel finishes records with gaps between their
// offsets in random order, some twice, and checks every mark (offset and
// leader epoch) against a plain model: the end of the finished prefix of
// the tracked offsets, marked each time it grows.
func TestOffsetsMarksMatchModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var got []kgo.EpochOffset
		o := newOffsets(func(m map[string]map[int32]kgo.EpochOffset) { got = append(got, m["t"][0]) })
		var offs []int64
		epochs := map[int64]int32{}
		var tr *partTracker
		for off := int64(rng.IntN(5)); len(offs) < 200; off += 1 + int64(rng.IntN(3)) { // gaps: compacted offsets
			epochs[off] = int32(off / 50) //nolint:gosec // small
			offs = append(offs, off)
			tr, _ = o.track(&kgo.Record{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: epochs[off]})
		}
		order := append(append([]int64(nil), offs...), offs[:40]...) // 40 finished twice
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var want []kgo.EpochOffset
		finished := map[int64]bool{}
		prefix := 0 // offs[:prefix] are finished and marked
		for _, off := range order {
			o.done(tr, off)
			o.done(tr, off+1000) // never tracked: ignored
			finished[off] = true
			grew := false
			for prefix < len(offs) && finished[offs[prefix]] {
				prefix, grew = prefix+1, true
			}
			if grew {
				last := offs[prefix-1]
				want = append(want, kgo.EpochOffset{Epoch: epochs[last], Offset: last + 1})
			}
			if len(tr.queue) > 2*(len(offs)-len(finished))+1 {
				t.Fatalf("round %d: %d entries for %d unfinished records", round, len(tr.queue), len(offs)-len(finished))
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: marks (-want +got):\n%s", round, diff)
		}
		if n := o.inFlight(); n != 0 {
			t.Fatalf("round %d: inFlight = %d, want 0", round, n)
		}
	}
}
