package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumer is one slot of the fleet: a share client at a time (gen counts
// them), which a fault cuts off or closes and the fleet starts again.
type consumer struct {
	id  int
	gen int

	mu       sync.Mutex
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	link     *link
	lastPoll atomic.Int64 // unix nanos of the last PollRecords call
	lastRecs atomic.Int64 // unix nanos of the last poll that returned records
}

func (c *consumer) name() string { return fmt.Sprintf("c%d-g%d", c.id, c.gen) }

type fleet struct {
	s    settings
	addr string
	t    *tally
	cs   []*consumer
	ctx  context.Context // the run's: consumers live until it ends or a fault stops them

	healing atomic.Bool // a heal sequence runs
	dumped  atomic.Bool // the goroutines were dumped (-dump)

	mu    sync.Mutex
	phase string // what is being tried on a stall: "faults", "none", "fresh-member", "alone", "restart-all"
}

func (f *fleet) setPhase(p string) {
	f.mu.Lock()
	f.phase = p
	f.mu.Unlock()
	slog.Info("phase", slog.String("phase", p))
}

func (f *fleet) getPhase() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.phase
}

// startConsumer starts a new client (a new member) in slot c.
func (f *fleet) startConsumer(ctx context.Context, c *consumer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	l := &link{}
	c.link = l
	name := c.name()
	opts := []kgo.Opt{}
	if f.s.klogDir != "" {
		if lf, err := os.Create(filepath.Join(f.s.klogDir, name+".log")); err == nil { //nolint:gosec // the user's directory
			opts = append(opts, kgo.WithLogger(kgo.BasicLogger(lf, kgo.LogLevelDebug, nil)))
		}
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(f.addr), kgo.ClientID(name), kgo.Dialer(l.dial),
		kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.KeepRetryableFetchErrors(),
		kgo.ShareMaxRecords(int32(f.s.maxRecords)), kgo.ShareMaxRecordsStrict(), //nolint:gosec // small
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, res kgo.ShareAckResults) {
			for _, r := range res {
				if r.Err != nil {
					f.t.errSeen("ack", r.Partition, r.Err, name)
				}
			}
		}))...)
	if err != nil {
		slog.Error("new client", slog.Any("err", err))
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	c.cl, c.cancel, c.done = cl, cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		f.consume(cctx, c, cl, name)
	}(c.done)
}

// consume polls, hands every record of a poll to a goroutine of its own,
// and polls again once they are all acknowledged.
func (f *fleet) consume(ctx context.Context, c *consumer, cl *kgo.Client, name string) {
	for ctx.Err() == nil {
		c.lastPoll.Store(time.Now().UnixNano())
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if f.s.pollWait > 0 {
			pctx, cancel = context.WithTimeout(ctx, f.s.pollWait)
		}
		fs := cl.PollRecords(pctx, f.s.maxRecords)
		cancel()
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				f.t.errSeen("fetch", p, err, name)
			}
		})
		recs := fs.Records()
		if len(recs) > 0 {
			c.lastRecs.Store(time.Now().UnixNano())
		}
		var wg sync.WaitGroup
		for _, r := range recs {
			wg.Go(func() { f.handle(ctx, c.link, r) })
		}
		wg.Wait()
	}
}

// handle accepts r, after a hold with renewals if it is a slow one. A
// consumer stopped meanwhile leaves it unacknowledged.
func (f *fleet) handle(ctx context.Context, l *link, r *kgo.Record) {
	if slow(f.s.seed, f.s.slowFraction, r.Partition, r.Offset) && r.DeliveryCount() <= 1 {
		end := time.Now().Add(f.s.slowHold)
		t := time.NewTicker(f.s.lock / 3)
		defer t.Stop()
		for time.Now().Before(end) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.wait()
				r.Ack(kgo.AckRenew)
			case <-time.After(time.Until(end)):
			}
		}
	}
	l.wait()
	if ctx.Err() != nil {
		return
	}
	if r.DeliveryCount() <= 1 && slow(f.s.seed^0x7e1, f.s.releaseFraction, r.Partition, r.Offset) {
		r.Ack(kgo.AckRelease) // a retryable failure without a backoff: delivered again
		return
	}
	r.Ack(kgo.AckAccept)
	f.t.accept(r.Partition, r.Offset)
}

// stop ends slot c's client: cut drops and refuses its connections first
// (the broker sees a member die, as after kill -9); otherwise the client is
// closed while its records are in flight (they are released).
func (f *fleet) stop(c *consumer, cut bool) {
	c.mu.Lock()
	cl, cancel, done, l := c.cl, c.cancel, c.done, c.link
	if cut && l != nil {
		l.cut()
	}
	c.cl = nil
	c.mu.Unlock()
	if cl == nil {
		return
	}
	if cut {
		cancel()
		go cl.Close() // it cannot reach the broker: nothing to wait for
		<-done
		return
	}
	go cl.Close() // mid-flight: the handlers still hold records
	cancel()
	<-done
}

func (f *fleet) stopAll() {
	for _, c := range f.cs {
		f.stop(c, false)
	}
}

// consumerFaults strikes a random consumer every s.consumerEvery on
// average, in turn: a kill (its connections cut for good, a new client 0.1
// to 1s later), a close mid-flight (then a new client), a partition from the
// broker for s.partitionFor, in turn both ways, requests only and replies
// only (the same client goes on), and a pause of s.pauseFor (the same
// client goes on).
func (f *fleet) consumerFaults(ctx context.Context, n *faultCounts) {
	rng := mrand.New(mrand.NewPCG(f.s.seed, 0xc0)) //nolint:gosec // a schedule
	kinds := []string{"kill", "close", "partition", "pause"}
	dirs := []int{both, toServer, fromServer}
	var parts int
	for i := 0; ; i++ {
		wait := f.s.consumerEvery/2 + time.Duration(rng.Int64N(int64(f.s.consumerEvery)))
		if !sleep(ctx, wait) {
			return
		}
		c := f.cs[rng.IntN(len(f.cs))]
		kind := kinds[i%len(kinds)]
		slog.Info("consumer fault", slog.String("consumer", c.name()), slog.String("kind", kind))
		switch kind {
		case "kill", "close":
			f.stop(c, kind == "kill")
			time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(900*time.Millisecond))))
			f.startConsumer(f.ctx, c) //nolint:contextcheck // a consumer outlives the fault phase
		case "partition":
			c.mu.Lock()
			l := c.link
			c.mu.Unlock()
			dir := dirs[parts%len(dirs)]
			parts++
			l.hold(dir, f.s.partitionFor, false)
			slog.Info("consumer partitioned", slog.String("consumer", c.name()), slog.Int("dir", dir))
		case "pause":
			c.mu.Lock()
			l := c.link
			c.mu.Unlock()
			l.hold(both, f.s.pauseFor, true)
		}
		n.consumer[kind].Add(1)
	}
}

// watch checks the partitions every 2s: a stall is noticed, described, and
// (on the first one, with -probe) the heal steps are tried.
func (f *fleet) watch(ctx context.Context, start time.Time) {
	f.setPhase("faults")
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var healing sync.WaitGroup
	defer healing.Wait()
	lastLog := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		stalls := f.check(start)
		for _, p := range stalls {
			f.describe(ctx, p)
		}
		if len(stalls) > 0 && f.s.probe && f.healing.CompareAndSwap(false, true) {
			healing.Go(func() {
				defer f.healing.Store(false)
				f.heal(ctx)
			})
		}
		if time.Since(lastLog) >= 30*time.Second {
			lastLog = time.Now()
			slog.Info("progress", slog.String("lags", f.lags()))
		}
	}
}

// check updates the stall state of every partition and returns the
// partitions that just stalled.
func (f *fleet) check(start time.Time) []int32 {
	t := f.t
	phase := f.getPhase()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int32
	now := time.Now()
	for p := range t.produced {
		lag := t.lag(p)
		if lag <= 0 {
			t.progress[p] = now
		}
		if !t.stalled[p].IsZero() && t.progress[p].After(t.stalled[p]) {
			for i := range t.stalls {
				if r := &t.stalls[i]; r.partition == int32(p) && r.healedBy == "" { //nolint:gosec // small
					r.healedBy, r.healedAfter = phase, now.Sub(t.stalled[p])
				}
			}
			slog.Info("stall healed", slog.Int("partition", p), slog.String("during", phase),
				slog.Duration("after", now.Sub(t.stalled[p])))
			t.stalled[p] = time.Time{}
		}
		if lag > 0 && now.Sub(t.progress[p]) > f.s.stall && t.stalled[p].IsZero() {
			t.stalled[p] = now
			t.stalls = append(t.stalls, stallReport{partition: int32(p), at: now.Sub(start), lag: lag}) //nolint:gosec // small
			slog.Error("partition stalled", slog.Int("partition", p), slog.Int64("lag", lag),
				slog.Duration("no_progress_for", now.Sub(t.progress[p])), slog.String("phase", phase))
			out = append(out, int32(p)) //nolint:gosec // small
		}
	}
	return out
}

func (f *fleet) lags() string {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	var b strings.Builder
	var acc int
	for p := range f.t.produced {
		fmt.Fprintf(&b, "%d:%d ", p, f.t.lag(p))
		acc += len(f.t.accepted[p])
	}
	fmt.Fprintf(&b, "accepted=%d", acc)
	return b.String()
}

// stalledAny reports whether a partition is stalled now.
func (f *fleet) stalledAny() bool {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	return slices.ContainsFunc(f.t.stalled, func(t time.Time) bool { return !t.IsZero() })
}

// heal waits for the fault phase to end, watches the stall for a while,
// then adds a fresh member, then leaves a fresh client alone in the group,
// then restarts every consumer, and stops at the first step that heals.
func (f *fleet) heal(ctx context.Context) {
	for f.getPhase() == "faults" {
		if !sleep(ctx, time.Second) {
			return
		}
	}
	steps := []struct {
		name string
		do   func()
		undo func()
	}{
		{"none", func() {}, func() {}},
		{"pause-resume-assigned", func() { f.pauseResumeAssigned(ctx) }, func() {}},
		{"restart-assigned", func() { f.restartAssigned(ctx) }, func() {}},
		{"fresh-member", f.addProbe, f.removeProbe},
		{"alone", f.alone, f.together},
		{"restart-all", f.restartAll, func() {}},
	}
	for _, st := range steps {
		if ctx.Err() != nil || !f.stalledAny() {
			return
		}
		f.setPhase(st.name)
		st.do()
		for range 30 {
			if !sleep(ctx, 2*time.Second) || !f.stalledAny() {
				break
			}
		}
		f.describeAll(ctx)
		if f.stalledAny() {
			st.undo()
		}
	}
	f.setPhase("after-heal-steps")
}

var probe = &consumer{id: 100}

func (f *fleet) addProbe() { f.startConsumer(f.ctx, probe) }

func (f *fleet) removeProbe() { f.stop(probe, false) }

// alone closes every consumer and leaves one fresh client in the group.
func (f *fleet) alone() {
	f.stopAll()
	f.stop(probe, false)
	f.startConsumer(f.ctx, probe)
}

func (f *fleet) together() {
	f.stop(probe, false)
	for _, c := range f.cs {
		f.startConsumer(f.ctx, c)
	}
}

func (f *fleet) restartAll() {
	f.stopAll()
	for _, c := range f.cs {
		f.startConsumer(f.ctx, c)
	}
}

// waitDrained ends the fault phase and waits up to d for every record to be
// accepted.
func (f *fleet) waitDrained(ctx context.Context, d time.Duration) (bool, time.Duration) {
	begin := time.Now()
	f.setPhase("drain")
	for time.Since(begin) < d {
		f.t.mu.Lock()
		var lag int64
		for p := range f.t.produced {
			lag += max(0, f.t.lag(p))
		}
		f.t.mu.Unlock()
		if lag == 0 {
			return true, time.Since(begin)
		}
		if !sleep(ctx, time.Second) {
			break
		}
	}
	return false, time.Since(begin)
}

// describe prints the share group's view of partition p and its consumers.
func (f *fleet) describe(ctx context.Context, p int32) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr))
	if err != nil {
		return
	}
	defer cl.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	var b strings.Builder
	fmt.Fprintf(&b, "stall of partition %d:\n", p)
	offs, err := adm.DescribeShareGroupOffsets(dctx, group)
	if d, ok := offs[group]; err == nil && ok {
		for q, o := range d.Offsets[topic] {
			fmt.Fprintf(&b, "  partition %d: share_start=%d share_lag=%d err=%v\n", q, o.StartOffset, o.Lag, o.Err)
		}
	} else {
		fmt.Fprintf(&b, "  share group offsets: %v\n", err)
	}
	groups, err := adm.DescribeShareGroups(dctx, group)
	if err != nil {
		fmt.Fprintf(&b, "  share group: %v\n", err)
	}
	for _, g := range groups {
		fmt.Fprintf(&b, "  group state=%s epoch=%d assignment_epoch=%d members=%d\n", g.GroupState, g.GroupEpoch,
			g.AssignmentEpoch, len(g.Members))
		for _, m := range g.Members {
			fmt.Fprintf(&b, "    member %s epoch=%d partitions=%v\n", m.ClientID, m.MemberEpoch, m.Assignment[topic])
		}
	}
	now := time.Now()
	for _, c := range append(slices.Clone(f.cs), probe) {
		if c.gen == 0 {
			continue
		}
		fmt.Fprintf(&b, "  consumer %s: last poll %s ago, last records %s ago\n", c.name(),
			now.Sub(time.Unix(0, c.lastPoll.Load())).Round(time.Millisecond),
			now.Sub(time.Unix(0, c.lastRecs.Load())).Round(time.Millisecond))
	}
	f.t.mu.Lock()
	for k, n := range f.t.errs {
		if strings.Contains(k, fmt.Sprintf("p=%d ", p)) {
			fmt.Fprintf(&b, "  %s: %d\n", k, n)
		}
	}
	f.t.mu.Unlock()
	slog.Info("describe", slog.String("state", b.String()))
	if f.s.dump != "" && f.dumped.CompareAndSwap(false, true) {
		if out, err := os.Create(f.s.dump); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(out, 2)
			_ = out.Close()
		}
	}
}

func (f *fleet) describeAll(ctx context.Context) {
	f.t.mu.Lock()
	var ps []int32
	for p, t := range f.t.stalled {
		if !t.IsZero() {
			ps = append(ps, int32(p)) //nolint:gosec // small
		}
	}
	f.t.mu.Unlock()
	for _, p := range ps {
		f.describe(ctx, p)
	}
}

// assignedStalled returns the consumers the share group assigns a stalled
// partition to, with those partitions.
func (f *fleet) assignedStalled(ctx context.Context) map[*consumer][]int32 {
	f.t.mu.Lock()
	stalled := map[int32]bool{}
	for p, t := range f.t.stalled {
		if !t.IsZero() {
			stalled[int32(p)] = true //nolint:gosec // small
		}
	}
	f.t.mu.Unlock()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr))
	if err != nil {
		return nil
	}
	defer cl.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(cl).DescribeShareGroups(dctx, group)
	if err != nil {
		return nil
	}
	out := map[*consumer][]int32{}
	for _, g := range groups {
		for _, m := range g.Members {
			for p := range m.Assignment[topic] {
				if !stalled[p] {
					continue
				}
				for _, c := range f.cs {
					c.mu.Lock()
					if c.cl != nil && c.name() == m.ClientID {
						out[c] = append(out[c], p)
					}
					c.mu.Unlock()
				}
			}
		}
	}
	return out
}

// pauseResumeAssigned pauses the stalled partitions on the clients they are
// assigned to and resumes them 2s later: the client forgets them in its
// share session and adds them again.
func (f *fleet) pauseResumeAssigned(ctx context.Context) {
	for c, ps := range f.assignedStalled(ctx) {
		c.mu.Lock()
		cl := c.cl
		c.mu.Unlock()
		if cl == nil {
			continue
		}
		slog.Info("pause and resume", slog.String("consumer", c.name()), slog.Any("partitions", ps))
		cl.PauseFetchPartitions(map[string][]int32{topic: ps})
		time.Sleep(2 * time.Second)
		cl.ResumeFetchPartitions(map[string][]int32{topic: ps})
	}
}

// restartAssigned closes the clients the stalled partitions are assigned to
// and starts new ones (new members).
func (f *fleet) restartAssigned(ctx context.Context) {
	for c := range f.assignedStalled(ctx) {
		slog.Info("restart", slog.String("consumer", c.name()))
		f.stop(c, false)
		f.startConsumer(f.ctx, c) //nolint:contextcheck // a consumer lives as long as the run
	}
}
