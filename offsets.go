package leasehold

import (
	"slices"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/jobtrace"
)

// Offset tracking. Records of one partition finish out of order (a bounded
// pool, held keys parked for later, retries with backoff), but Kafka commits
// one offset per partition meaning "everything below is done". Each assigned
// partition therefore has a tracker of its in-flight offsets, and only the
// contiguous prefix of finished records is marked for commit. A run of
// finished records behind an unfinished one is kept as one entry (its first
// and last offsets), so a tracker holds at most two entries per unfinished
// record however many finish behind a long job at the partition's head. A record parked
// because its key is held elsewhere stays in flight, so nothing at or after it
// is committed while it waits.
//
// Marks go to franz-go (AutoCommitMarks + MarkCommitOffsets), which commits
// them on an interval and, blocking, in the revoke callback. Marks are issued
// under offsets.mu, and revoking a partition removes its tracker under the
// same lock before the blocking commit, so no mark for a revoked partition can
// reach franz-go afterwards: records of a revoked partition keep running
// under their leases but their completions no longer move offsets.

type partKey struct {
	topic     string
	partition int32
}

// inflight is one unfinished record, or a run of finished records (done)
// from offset to end with no unfinished record between them.
type inflight struct {
	offset int64
	end    int64 // the last offset of a finished run; offset for an unfinished record
	size   int64 // recordSize of an unfinished record: what it counts against the memory budget
	epoch  int32 // the leader epoch of the record at end
	done   bool
}

type partTracker struct {
	tp      partKey
	removed bool       // guarded by offsets.mu
	queue   []inflight // ascending offsets; queue[0] is the oldest unfinished; no two finished runs adjacent
	last    int64      // highest offset ever tracked, -1 before the first
	marked  int64      // next offset to commit, -1 before the first mark
	first   int64      // first offset tracked on this assignment
	hw      int64      // high watermark of the latest fetch, -1 before one

	// markArg is the one-partition argument of every mark of t, reused
	// (guarded by offsets.mu): franz-go copies what it is given.
	markArg map[string]map[int32]kgo.EpochOffset
}

type offsets struct {
	mu    sync.Mutex
	parts map[partKey]*partTracker
	mark  func(map[string]map[int32]kgo.EpochOffset)

	// held is what the unfinished records of the assigned partitions
	// weigh (the memory budget's measure); peak is held's highest bytes.
	held held
	peak int64
}

// held is what a set of records weighs: their bytes (recordSize) and count.
type held struct {
	bytes   int64
	records int
}

// newOffsets returns offsets that mark with mark (Client.MarkCommitOffsets),
// which is called under offsets.mu and must not keep its argument.
func newOffsets(mark func(map[string]map[int32]kgo.EpochOffset)) *offsets {
	return &offsets{parts: make(map[partKey]*partTracker), mark: mark}
}

// track registers a polled record as in flight. It returns false for a record
// at or below an offset already tracked on this assignment (a re-fetch of
// something that is done or already in flight), which the caller drops.
func (o *offsets) track(r *kgo.Record) (*partTracker, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	tp := partKey{r.Topic, r.Partition}
	t := o.parts[tp]
	if t == nil {
		t = &partTracker{tp: tp, last: -1, marked: -1, first: r.Offset, hw: -1,
			markArg: map[string]map[int32]kgo.EpochOffset{tp.topic: {}}}
		o.parts[tp] = t
	}
	if r.Offset <= t.last {
		return t, false
	}
	t.last = r.Offset
	size := recordSize(r)
	t.queue = append(t.queue, inflight{offset: r.Offset, end: r.Offset, size: size, epoch: r.LeaderEpoch})
	o.held.bytes += size
	o.held.records++
	o.peak = max(o.peak, o.held.bytes)
	return t, true
}

// recordSize is what a record counts against the memory budget: its key,
// value and headers.
func recordSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// weight returns what the unfinished records of the assigned partitions
// weigh now, and the highest byte count they reached.
func (o *offsets) weight() (now held, peakBytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held, o.peak
}

// done marks offset finished on t and, if the finished prefix grew and t is
// still assigned, marks the new prefix end for commit.
func (o *offsets) done(t *partTracker, offset int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := sort.Search(len(t.queue), func(i int) bool { return t.queue[i].end >= offset })
	if i == len(t.queue) || t.queue[i].offset != offset || t.queue[i].done {
		return
	}
	t.queue[i].done = true
	if !t.removed { // a removed tracker's records were let go by remove
		o.held.bytes -= t.queue[i].size
		o.held.records--
	}
	t.merge(i)
	if !t.queue[0].done {
		return
	}
	lastDone := t.queue[0] // merged: the whole finished prefix
	t.queue = t.queue[1:]
	if len(t.queue) == 0 {
		t.queue = nil // let the backing array go
	}
	t.marked = lastDone.end + 1
	if t.removed || o.mark == nil {
		return
	}
	t.markArg[t.tp.topic][t.tp.partition] = kgo.EpochOffset{Epoch: lastDone.epoch, Offset: lastDone.end + 1}
	o.mark(t.markArg)
}

// merge joins the entry at i, just finished, with the finished runs beside
// it (under offsets.mu), so that finished records between two unfinished
// ones take one entry.
func (t *partTracker) merge(i int) {
	if i+1 < len(t.queue) && t.queue[i+1].done {
		t.queue[i].end, t.queue[i].epoch = t.queue[i+1].end, t.queue[i+1].epoch
		t.queue = slices.Delete(t.queue, i+1, i+2)
	}
	if i > 0 && t.queue[i-1].done {
		t.queue[i-1].end, t.queue[i-1].epoch = t.queue[i].end, t.queue[i].epoch
		t.queue = slices.Delete(t.queue, i, i+1)
	}
}

// alive reports whether t is still assigned.
func (o *offsets) alive(t *partTracker) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !t.removed
}

// remove forgets the given partitions (revoked or lost).
func (o *offsets) remove(parts map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			tp := partKey{topic, p}
			if t := o.parts[tp]; t != nil {
				o.forget(t)
			}
		}
	}
}

// removeAll forgets every partition.
func (o *offsets) removeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range o.parts {
		o.forget(t)
	}
}

// forget removes t (under o.mu): its unfinished records no longer count
// against the memory budget. The parked ones are dropped; the few still
// running (at most WithConcurrency) finish under their leases.
func (o *offsets) forget(t *partTracker) {
	t.removed = true
	delete(o.parts, t.tp)
	for _, e := range t.queue {
		if !e.done {
			o.held.bytes -= e.size
			o.held.records--
		}
	}
}

// inFlight counts tracked, unfinished records.
func (o *offsets) inFlight() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, t := range o.parts {
		for _, e := range t.queue {
			if !e.done {
				n++
			}
		}
	}
	return n
}

// highWatermarks records the high watermark of each assigned partition in a
// poll's fetches (franz-go reports it with every fetch response, so this
// costs no broker round trip).
func (o *offsets) highWatermarks(fs kgo.Fetches) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if t := o.parts[partKey{p.Topic, p.Partition}]; t != nil && p.HighWatermark > t.hw {
			t.hw = p.HighWatermark
		}
	})
}

// commitLag reports, for each assigned partition with a known high
// watermark, the high watermark minus the committed offset (committed, from
// the client's view of the group's commits; a partition without a commit yet
// counts from the first offset fetched on this assignment).
func (o *offsets) commitLag(committed map[string]map[int32]kgo.EpochOffset) []jobtrace.PartitionLag {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]jobtrace.PartitionLag, 0, len(o.parts))
	for tp, t := range o.parts {
		if t.hw < 0 {
			continue
		}
		at := t.first
		if eo, ok := committed[tp.topic][tp.partition]; ok && eo.Offset >= 0 {
			at = eo.Offset
		}
		out = append(out, jobtrace.PartitionLag{Topic: tp.topic, Partition: tp.partition, Lag: max(t.hw-at, 0)})
	}
	return out
}
