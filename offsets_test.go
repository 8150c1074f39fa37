package leasehold

import (
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
