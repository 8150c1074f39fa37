// Package devkafka runs kfake, franz-go's in-process Kafka, as leasehold's
// development broker (`worker dev-broker`, the embedded Kafka of `worker
// run` and `make run`), with one repair on top.
//
// kfake starts a classic group member's session timer when it delivers the
// member's JoinGroup or SyncGroup answer. A member that dies while its
// JoinGroup waits for a rebalance to finish never gets that answer, so its
// timer never starts: the group completes the rebalance with the dead member
// in it, the leader assigns it partitions, and nobody ever consumes them.
// Apache Kafka starts every member's session timer when the join phase
// completes, delivered or not, and so evicts such a member after its session
// timeout. The [Reaper] does the same from outside: it watches every group
// request, and when a group has been stable for longer than a member's
// session timeout while that member sent nothing at all, it makes the member
// leave (a LeaveGroup naming its member ID), which rebalances the group.
//
// The same dead member also stalls the next rebalance: kfake waits for every
// member to rejoin until the rebalance timeout, but restarts that wait at
// every JoinGroup, and the live members resend theirs each time their client
// gives up waiting (rebalance timeout + request overhead, 20s in the chaos
// runs). With a few live members the wait never ends and the group stays in
// PreparingRebalance with nobody consuming. kfake removes a live member that
// stays silent for its session timeout after its last answer, even while its
// JoinGroup waits, so a member silent for twice its session timeout in a
// rebalancing group is one whose timer never started: the Reaper evicts it.
//
// That rule ends a wait held up by one dead member, not one that members
// keep holding up: while some members' requests are lost (a partitioned
// network) and their clients come back under new member IDs, a new straggler
// joins before the last is evicted, and every JoinGroup and every eviction
// restarts kfake's wait. Apache Kafka's wait does not restart: when the
// longest rebalance timeout of the members has passed since the rebalance
// began, it removes every member that has not rejoined and completes the
// rebalance. The Reaper does that too, a little later (at 1.5 times that
// timeout, so that kfake's own wait ends first where it can): it makes every
// member of a group rebalancing for that long that sent no JoinGroup since
// the rebalance began leave at once, in one LeaveGroup, so that the members
// left are all waiting in their JoinGroup and the rebalance completes.
//
// Against a real broker none of this is used.
package devkafka

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is a kfake cluster with its [Reaper].
type Cluster struct {
	*kfake.Cluster
	reaper *Reaper
}

// Start starts an in-memory Kafka listening on host:port (the port must be
// free) with topics (name to partition count) seeded, topics auto-created
// with 6 partitions, groupMinSession as the smallest session timeout a
// member may ask for (0: kfake's default, 6s), and a Reaper logging
// evictions to slog's default logger. It returns the cluster's addresses and
// a stop function that closes it.
func Start(ctx context.Context, host string, port int, topics map[string]int32, groupMinSession time.Duration) ([]string, func(), error) {
	opts := []kfake.Opt{
		kfake.Ports(port),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return (&net.ListenConfig{}).Listen(ctx, network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(6),
	}
	for name, partitions := range topics {
		opts = append(opts, kfake.SeedTopics(partitions, name))
	}
	if groupMinSession > 0 {
		opts = append(opts, kfake.GroupMinSessionTimeout(groupMinSession))
	}
	c, err := NewCluster(slog.Default(), 0, opts...) //nolint:contextcheck // the reaper lives until the cluster's Close, not ctx
	if err != nil {
		return nil, nil, fmt.Errorf("start embedded kafka on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	return c.ListenAddrs(), c.Close, nil
}

// NewCluster starts a kfake cluster with opts and a Reaper on it that
// checks every interval (0: 250ms) and logs to log (nil: discard).
func NewCluster(log *slog.Logger, interval time.Duration, opts ...kfake.Opt) (*Cluster, error) {
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, err
	}
	r, err := StartReaper(c, log, interval)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Cluster{Cluster: c, reaper: r}, nil
}

// Close stops the reaper, then the cluster.
func (c *Cluster) Close() {
	c.reaper.Stop()
	c.Cluster.Close()
}

// Reaper evicts classic group members that stay silent for their session
// timeout in a stable group (twice that in a rebalancing one), and those
// that do not rejoin a rebalance overdue past their rebalance timeout (see
// the package doc).
type Reaper struct {
	log      *slog.Logger
	cl       *kgo.Client
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	seen   map[memberKey]member // guarded by mu
	stable map[string]time.Time // group -> since when it is seen stable; loop only
	// preparing: group -> the rebalance it is seen preparing began after
	// this instant (the start of the last sweep that did not see it
	// preparing); loop only.
	preparing map[string]time.Time
	swept     time.Time // the start of the last sweep that described the groups; loop only
}

type memberKey struct{ group, id string }

type member struct {
	last      time.Time     // its last request
	joined    time.Time     // its last JoinGroup
	session   time.Duration // its session timeout
	rebalance time.Duration // its rebalance timeout
}

// overdueFactor times the longest rebalance timeout of a group's members is
// how long the Reaper lets a rebalance run before it removes the members that
// have not rejoined (Apache Kafka does at 1 times).
const overdueFactor = 1.5

// stragglers returns the members of a group preparing a rebalance that began
// after start, among ids (members' records in seen, by ID), that sent no
// JoinGroup since start, once the rebalance has run past overdueFactor times
// the longest rebalance timeout known among them; nil before, and when no
// member's timeout is known. A member without a record is a straggler: every
// member of a group the Reaper watched from its start has sent a JoinGroup.
func stragglers(ids []string, seen map[string]member, start, now time.Time) []string {
	var longest time.Duration
	for _, id := range ids {
		longest = max(longest, seen[id].rebalance)
	}
	if longest <= 0 || now.Sub(start) <= time.Duration(overdueFactor*float64(longest)) {
		return nil
	}
	var out []string
	for _, id := range ids {
		if !seen[id].joined.After(start) {
			out = append(out, id)
		}
	}
	return out
}

// dead reports whether m, silent since m.last, is dead at now in a group in
// state (stable since since, when it is).
func (m member) dead(state string, since, now time.Time) bool {
	if m.session <= 0 {
		return false
	}
	switch state {
	case "Stable":
		return now.Sub(since) > m.session && now.Sub(m.last) > m.session
	case "PreparingRebalance":
		return now.Sub(m.last) > 2*m.session
	}
	return false
}

// StartReaper starts a Reaper on c. Stop it before closing c.
func StartReaper(c *kfake.Cluster, log *slog.Logger, interval time.Duration) (*Reaper, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reaper{
		log: log, cl: cl, interval: interval, cancel: cancel, done: make(chan struct{}),
		seen: map[memberKey]member{}, stable: map[string]time.Time{},
		preparing: map[string]time.Time{}, swept: time.Now(),
	}
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			r.observe(req)
			return nil, nil, false // observe only: kfake handles the request
		})
	}
	go r.loop(ctx)
	return r, nil
}

// Stop stops the reaper; it is idempotent.
func (r *Reaper) Stop() {
	r.cancel()
	<-r.done
}

// observe records a sign of life of the member sending req.
func (r *Reaper) observe(req kmsg.Request) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch q := req.(type) {
	case *kmsg.JoinGroupRequest:
		if q.MemberID != "" {
			r.seen[memberKey{q.Group, q.MemberID}] = member{last: now, joined: now,
				session: time.Duration(q.SessionTimeoutMillis) * time.Millisecond, rebalance: time.Duration(q.RebalanceTimeoutMillis) * time.Millisecond}
		}
	case *kmsg.SyncGroupRequest:
		r.touch(memberKey{q.Group, q.MemberID}, now)
	case *kmsg.HeartbeatRequest:
		r.touch(memberKey{q.Group, q.MemberID}, now)
	case *kmsg.OffsetCommitRequest:
		r.touch(memberKey{q.Group, q.MemberID}, now)
	case *kmsg.LeaveGroupRequest:
		delete(r.seen, memberKey{q.Group, q.MemberID})
		for _, m := range q.Members {
			delete(r.seen, memberKey{q.Group, m.MemberID})
		}
	}
}

func (r *Reaper) touch(k memberKey, now time.Time) {
	if m, ok := r.seen[k]; ok {
		m.last = now
		r.seen[k] = m
	}
}

func (r *Reaper) loop(ctx context.Context) {
	defer close(r.done)
	defer r.cl.Close()
	adm := kadm.NewClient(r.cl)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.sweep(ctx, adm)
	}
}

// sweep evicts, in every group stable for longer than a member's session
// timeout, each member not heard from for that long; in every rebalancing
// group each member silent for twice its session timeout, and, once the
// rebalance is overdue, every member that has not rejoined (see the package
// doc). It then forgets the members no group lists any more.
func (r *Reaper) sweep(ctx context.Context, adm *kadm.Client) {
	cctx, cancel := context.WithTimeout(ctx, r.interval*4)
	defer cancel()
	began := time.Now()
	listed, err := adm.ListGroups(cctx)
	if err != nil {
		return
	}
	described, err := adm.DescribeGroups(cctx, listed.Groups()...)
	if err != nil {
		return
	}
	now := time.Now()
	listedMembers := make(map[memberKey]bool)
	for _, g := range described {
		for _, m := range g.Members {
			listedMembers[memberKey{g.Group, m.MemberID}] = true
		}
		if leaves := r.judge(g, now); len(leaves) > 0 {
			r.evict(cctx, g.Group, g.State, leaves)
		}
	}
	r.forget(described, listedMembers, now)
	r.swept = began
}

// Why the Reaper evicts a member: the LeaveGroup's reason.
const (
	reasonSilent      = "leasehold devkafka: no request from the member for its session timeout"
	reasonNotRejoined = "leasehold devkafka: the member did not rejoin a rebalance overdue past its rebalance timeout"
)

// leave is a member the Reaper makes leave, and why (the LeaveGroup's
// reason).
type leave struct{ id, reason string }

// judge returns the members of g to evict: those that are dead
// (member.dead) and, of the others, the stragglers of an overdue rebalance.
// Both go in one LeaveGroup: were the dead sent first, that leave could end
// the rebalance, and kfake would answer the stragglers' UNKNOWN_MEMBER_ID.
func (r *Reaper) judge(g kadm.DescribedGroup, now time.Time) []leave {
	since := now
	if g.State != "Stable" {
		delete(r.stable, g.Group)
	} else if s, ok := r.stable[g.Group]; ok {
		since = s
	} else {
		r.stable[g.Group] = now
	}
	preparing := g.State == "PreparingRebalance"
	start, ok := r.preparing[g.Group]
	if !preparing {
		delete(r.preparing, g.Group)
	} else if !ok {
		// The last sweep saw it in another state, or not at all.
		start = r.swept
		r.preparing[g.Group] = start
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var leaves []leave
	var alive []string
	seen := make(map[string]member, len(g.Members))
	for _, m := range g.Members {
		s, ok := r.seen[memberKey{g.Group, m.MemberID}]
		if ok && s.dead(g.State, since, now) {
			leaves = append(leaves, leave{m.MemberID, reasonSilent})
			continue
		}
		alive = append(alive, m.MemberID)
		seen[m.MemberID] = s
	}
	if preparing {
		for _, id := range stragglers(alive, seen, start, now) {
			leaves = append(leaves, leave{id, reasonNotRejoined})
		}
	}
	return leaves
}

// forget drops the records of members that no group lists (left, evicted,
// or removed by kfake) and that have been silent for twice their session
// timeout (a minute when it is not known), and the state of groups no
// longer listed, so that the Reaper's memory stays bounded on a broker that
// runs for weeks.
func (r *Reaper) forget(described kadm.DescribedGroups, listed map[memberKey]bool, now time.Time) {
	r.mu.Lock()
	for k, m := range r.seen {
		if !listed[k] && now.Sub(m.last) > max(2*m.session, time.Minute) {
			delete(r.seen, k)
		}
	}
	r.mu.Unlock()
	for _, m := range []map[string]time.Time{r.preparing, r.stable} {
		for g := range m {
			if _, ok := described[g]; !ok {
				delete(m, g)
			}
		}
	}
}

// evict makes members leaves of group leave, in one LeaveGroup (so that a
// rebalance waiting on all of them completes at once), each for its reason.
func (r *Reaper) evict(ctx context.Context, group, state string, leaves []leave) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	ids := make([]string, 0, len(leaves))
	reasons := make(map[string]string, len(leaves))
	for _, l := range leaves {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = l.id
		m.Reason = &l.reason
		req.Members = append(req.Members, m)
		ids = append(ids, l.id)
		reasons[l.id] = l.reason
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		r.log.Warn("evicting group members failed", slog.String("group", group), slog.String("state", state),
			slog.Any("members", ids), slog.Any("err", err))
		return
	}
	delete(r.stable, group) // the leave rebalances the group
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
			r.log.Warn("evicting a group member failed", slog.String("group", group), slog.String("state", state),
				slog.String("member", m.MemberID), slog.Any("err", err))
			continue
		}
		r.mu.Lock()
		delete(r.seen, memberKey{group, m.MemberID})
		r.mu.Unlock()
		r.log.Warn("evicted a group member", slog.String("group", group), slog.String("state", state),
			slog.String("member", m.MemberID), slog.String("reason", reasons[m.MemberID]))
	}
}
