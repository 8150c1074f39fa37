package devkafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/devkafka"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	group = "g"
	topic = "t"
	parts = 4
)

// TestDeadJoinerEvicted makes a member die while its JoinGroup waits for a
// rebalance, waits until the group is stable with the dead member in it
// (holding a share of the partitions), and checks that the Reaper evicts it
// so that the live member owns every partition. Plain kfake keeps the dead
// member for good in most runs of this scenario (6 of 10 when it was
// written; in the others the connection's close races the JoinGroup answer
// and kfake's own session timer starts).
func TestDeadJoinerEvicted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test needs a Kafka broker")
	}
	c, err := devkafka.NewCluster(nil, 100*time.Millisecond, clusterOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dead := deadJoiner(t, c.Cluster)
	deadline := time.Now().Add(15 * time.Second)
	for {
		members := assignment(t, c.ListenAddrs())
		_, deadIn := members[dead]
		if !deadIn && len(members) == 1 {
			for _, ps := range members {
				if len(ps) == parts {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead member %s still assigned or partitions not moved: %v", dead, members)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func clusterOpts() []kfake.Opt {
	return []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(parts, topic),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
}

// deadJoiner runs a live consumer in the group, then joins a second member
// by hand and closes its connection while its JoinGroup waits (the live
// member heartbeats seldom, so the rebalance does not end before the close). It returns the dead member's ID once the group is
// stable again with it.
func deadJoiner(t *testing.T, c *kfake.Cluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	live, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.RangeBalancer()), // eager: no second rebalance after the join
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	go func() { // the live member must poll for its group session to run
		for {
			if fs := live.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
		}
	}()
	waitStable(ctx, t, c.ListenAddrs(), 1)

	// The live member heartbeats every 2s: right after one of its
	// heartbeats the dead member has ~2s to join and die before the live
	// member learns of the rebalance and rejoins.
	beat := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case beat <- struct{}{}:
		default:
		}
		return nil, nil, false
	})
	// The dead member speaks Kafka over a bare socket, so that nothing but
	// its JoinGroup is outstanding when the socket closes (as with a
	// SIGKILLed process).
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	join := joinRequest(time.Second, 10*time.Second)
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID("dead"))
	for len(beat) > 0 { // join right after a heartbeat of the live member
		<-beat
	}
	<-beat
	if _, err := conn.Write(format.AppendRequest(nil, join, 1)); err != nil {
		t.Fatal(err)
	}
	resp := readJoin(t, conn)
	id := resp.MemberID
	if id == "" {
		t.Fatalf("join: no member ID (error code %d)", resp.ErrorCode)
	}
	join.MemberID = id
	if _, err := conn.Write(format.AppendRequest(nil, join, 2)); err != nil {
		t.Fatal(err)
	}
	waitJoined(ctx, t, c.ListenAddrs(), 2) // the JoinGroup reached the broker
	_ = conn.Close()

	waitStable(ctx, t, c.ListenAddrs(), 2)
	if ps := assignment(t, c.ListenAddrs())[id]; len(ps) == 0 {
		t.Fatalf("the dead member holds no partitions: the scenario did not reproduce")
	}
	return id
}

// joinRequest is a JoinGroup v5 of a consumer of topic (range assignor),
// without a member ID.
func joinRequest(session, rebalance time.Duration) *kmsg.JoinGroupRequest {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{topic}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 5
	join.Group = group
	join.SessionTimeoutMillis = int32(session.Milliseconds())
	join.RebalanceTimeoutMillis = int32(rebalance.Milliseconds())
	join.ProtocolType = "consumer"
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	proto.Metadata = meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	return join
}

// readResponse reads one response of resp's version from conn within d
// into resp.
func readResponse(conn net.Conn, d time.Duration, resp kmsg.Response) error {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return err
	}
	return resp.ReadFrom(body[4:]) // after the correlation ID
}

// readJoin reads one JoinGroup v5 response from conn.
func readJoin(t *testing.T, conn net.Conn) *kmsg.JoinGroupResponse {
	t.Helper()
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = 5
	if err := readResponse(conn, 10*time.Second, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// waitStable waits until the group is stable with n members.
func waitStable(ctx context.Context, t *testing.T, addrs []string, n int) {
	t.Helper()
	waitGroup(ctx, t, addrs, fmt.Sprintf("stable with %d members", n), func(g kadm.DescribedGroup) bool {
		return g.State == "Stable" && len(g.Members) == n
	})
}

// waitJoined waits until the broker has taken a JoinGroup that started a
// rebalance: the group is past Stable, or stable again with n members (a
// rebalance that ended before a look at it).
func waitJoined(ctx context.Context, t *testing.T, addrs []string, n int) {
	t.Helper()
	waitGroup(ctx, t, addrs, "rebalancing", func(g kadm.DescribedGroup) bool {
		return g.State == "PreparingRebalance" || g.State == "CompletingRebalance" ||
			g.State == "Stable" && len(g.Members) == n
	})
}

// waitGroup waits until the group, described, is as ok wants it.
func waitGroup(ctx context.Context, t *testing.T, addrs []string, what string, ok func(kadm.DescribedGroup) bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil && ok(gs[group]) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group not %s: %v %+v", what, err, gs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// assignment returns each member's assigned partitions of topic.
func assignment(t *testing.T, addrs []string) map[string][]int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	gs, err := kadm.NewClient(cl).DescribeGroups(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int32{}
	for _, m := range gs[group].Members {
		var ps []int32
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range ca.Topics {
				ps = append(ps, tp.Partitions...)
			}
		}
		slices.Sort(ps)
		out[m.MemberID] = ps
	}
	return out
}

// TestStalledRebalanceEnds builds the group the chaos runs wedged in: a dead
// member without a session timer (its JoinGroup answer went to a closed
// socket) and a live member that keeps resending its JoinGroup, each of which
// restarts kfake's rebalance wait, so that the group stays in
// PreparingRebalance. The Reaper must evict the dead member so that the
// rebalance ends with the live member alone (after twice the dead member's 1s
// session). On plain kfake the live member gets no answer until its own 30s
// session times out as it waits.
//
// kfake mostly answers a closed socket's request "successfully" (its answer
// races the close; in about one attempt in ten here it does not), and then
// starts the dead member's session timer and removes it by itself: such an
// attempt is not the scenario, and the test builds it again with a new dead
// member (about 1.6s an attempt) for up to 90s, failing if it never happens.
// TestMemberDead checks the rule itself without kfake.
func TestStalledRebalanceEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test needs a Kafka broker")
	}
	c, logged := reapedCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	addr := c.ListenAddrs()[0]

	// The live member joins alone and leads. Its session outlasts the test
	// (kfake, unlike Apache Kafka, times out a member's session while its
	// JoinGroup waits).
	live := newBareMember(ctx, t, addr, "live", 30*time.Second, 5*time.Second)
	gen := live.join(t).Generation
	budget := time.Now().Add(90 * time.Second)
	attempt := 0
	for time.Now().Before(budget) {
		attempt++
		live.sync(t, gen)
		waitStable(ctx, t, c.ListenAddrs(), 1)
		dead := deadInStableGroup(ctx, t, c.ListenAddrs(), live)
		evicted := "state=PreparingRebalance member=" + dead
		// The live member rejoins (a new rebalance) and keeps resending
		// its JoinGroup every 2s, less than the 5s rebalance timeout.
		start := time.Now()
		resp := live.rejoinUntilAnswered(ctx, t)
		if resp.ErrorCode != 0 || len(resp.Members) != 1 {
			t.Fatalf("rebalance answer: error %d, members %v", resp.ErrorCode, resp.Members)
		}
		gen = resp.Generation
		if strings.Contains(logged.String(), evicted) {
			t.Logf("attempt %d: the reaper evicted the dead member; the rebalance ended after %s",
				attempt, time.Since(start).Round(time.Millisecond))
			return
		}
	}
	t.Fatalf("in %d attempts kfake's own session timer always removed the dead member: the scenario did not happen\n%s", attempt, logged.String())
}

// TestOverdueRebalanceEnds builds a rebalance that kfake alone would keep
// waiting: a member that never rejoins and is not silent long enough for the
// dead-member rule (its 60s session), and a live member that resends its
// JoinGroup every 2s, each restarting kfake's 10s wait (long enough that a
// starved test does not let it run out). kfake would end it only when its own
// session timer removes the straggler, 60s after its last answer. Apache
// Kafka ends it after the 10s rebalance timeout. The Reaper must make the
// straggler leave once the rebalance has run past 1.5 times that timeout, so
// that the live member's JoinGroup is answered with the live member alone.
func TestOverdueRebalanceEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test needs a Kafka broker")
	}
	c, logged := reapedCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addr := c.ListenAddrs()[0]

	live := newBareMember(ctx, t, addr, "live", 2*time.Minute, 10*time.Second)
	live.sync(t, live.join(t).Generation)
	waitStable(ctx, t, c.ListenAddrs(), 1)
	straggler := newBareMember(ctx, t, addr, "straggler", time.Minute, 10*time.Second)
	straggler.send(t, straggler.id) // its JoinGroup with its ID: a rebalance
	// The live member rejoins once the broker has taken that JoinGroup: a
	// rejoin taken first ends a rebalance of its own at once, and the
	// straggler's JoinGroup then starts another, which fails the live
	// member's SyncGroup (REBALANCE_IN_PROGRESS).
	waitJoined(ctx, t, c.ListenAddrs(), 2)
	live.sync(t, live.rejoin(ctx, t).Generation)
	if resp := readJoin(t, straggler.conn); resp.ErrorCode != 0 {
		t.Fatalf("straggler's join: error code %d", resp.ErrorCode)
	}
	waitStable(ctx, t, c.ListenAddrs(), 2)
	// The Reaper dates a rebalance from its last sweep that did not see it:
	// the third of its sweeps to start from now began after the second,
	// which began once the group was stable (only the Reaper lists groups).
	sweeps := make(chan struct{}, 3)
	c.ControlKey(int16(kmsg.ListGroups), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case sweeps <- struct{}{}:
		default:
		}
		return nil, nil, false
	})
	for range 3 {
		select {
		case <-sweeps:
		case <-ctx.Done():
			t.Fatal("the Reaper did not sweep")
		}
	}

	// The live member rejoins (a new rebalance) and resends its JoinGroup
	// every 2s; the straggler sends nothing more.
	start := time.Now()
	resp := live.rejoinUntilAnswered(ctx, t)
	took := time.Since(start)
	if resp.ErrorCode != 0 || len(resp.Members) != 1 || resp.Members[0].MemberID != live.id {
		t.Fatalf("rebalance answer after %s: error %d, members %v", took, resp.ErrorCode, resp.Members)
	}
	// The Reaper logs the eviction once kfake has answered its LeaveGroup,
	// which may be after the live member's answer.
	want := "state=PreparingRebalance member=" + straggler.id + ` reason="leasehold devkafka: the member did not rejoin`
	if !logged.waitFor(ctx, want) {
		t.Fatalf("the rebalance ended after %s without the Reaper's eviction of the straggler:\n%s", took, logged.String())
	}
	t.Logf("the Reaper evicted the straggler; the rebalance ended after %s (the straggler's session: 60s)", took.Round(time.Millisecond))
}

// reapedCluster starts a one-broker kfake cluster with a Reaper sweeping
// every 100ms, closed at the test's end, and the buffer the Reaper logs to.
func reapedCluster(t *testing.T) (*devkafka.Cluster, *syncBuffer) {
	t.Helper()
	logged := new(syncBuffer)
	c, err := devkafka.NewCluster(slog.New(slog.NewTextHandler(logged, nil)), 100*time.Millisecond, clusterOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, logged
}

// deadInStableGroup joins a second member and closes its socket while its
// JoinGroup waits; live's rejoin completes the rebalance, and the dead
// member's answer goes to the closed socket. It returns the dead member's ID
// once the group is stable with both.
func deadInStableGroup(ctx context.Context, t *testing.T, addrs []string, live *bareMember) string {
	t.Helper()
	dead := newBareMember(ctx, t, addrs[0], "dead", time.Second, 2*time.Second)
	dead.send(t, dead.id) // JoinGroup with its ID: the rebalance starts
	waitJoined(ctx, t, addrs, 2)
	dead.close()
	time.Sleep(300 * time.Millisecond) // kfake reads the close before it answers
	live.sync(t, live.rejoin(ctx, t).Generation)
	waitStable(ctx, t, addrs, 2)
	return dead.id
}

// bareMember speaks the group protocol over a bare socket, so that a test
// decides when it sends and when it goes silent.
type bareMember struct {
	addr   string
	conn   net.Conn
	id     string
	format *kmsg.RequestFormatter
	req    *kmsg.JoinGroupRequest
	corr   int32
}

// newBareMember connects and takes a member ID (the first JoinGroup of
// v4+ answers MEMBER_ID_REQUIRED with it).
func newBareMember(ctx context.Context, t *testing.T, addr, name string, session, rebalance time.Duration) *bareMember {
	t.Helper()
	m := &bareMember{addr: addr, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(name)),
		req: joinRequest(session, rebalance)}
	m.reconnect(ctx, t)
	t.Cleanup(m.close)
	m.send(t, "")
	resp := readJoin(t, m.conn)
	if resp.MemberID == "" {
		t.Fatalf("%s: no member ID (error code %d)", name, resp.ErrorCode)
	}
	m.id = resp.MemberID
	return m
}

func (m *bareMember) reconnect(ctx context.Context, t *testing.T) {
	t.Helper()
	m.close()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", m.addr)
	if err != nil {
		t.Fatal(err)
	}
	m.conn = conn
}

func (m *bareMember) close() {
	if m.conn != nil {
		_ = m.conn.Close()
	}
}

// send writes a JoinGroup as member id ("" for a new member).
func (m *bareMember) send(t *testing.T, id string) {
	t.Helper()
	m.req.MemberID = id
	m.corr++
	if _, err := m.conn.Write(m.format.AppendRequest(nil, m.req, m.corr)); err != nil {
		t.Fatal(err)
	}
}

// join sends a JoinGroup with the member's ID and reads the answer.
func (m *bareMember) join(t *testing.T) *kmsg.JoinGroupResponse {
	t.Helper()
	m.send(t, m.id)
	resp := readJoin(t, m.conn)
	if resp.ErrorCode != 0 {
		t.Fatalf("join: error code %d", resp.ErrorCode)
	}
	return resp
}

// rejoin joins on a fresh socket.
func (m *bareMember) rejoin(ctx context.Context, t *testing.T) *kmsg.JoinGroupResponse {
	t.Helper()
	m.reconnect(ctx, t)
	return m.join(t)
}

// answered waits up to d for the answer to the JoinGroup in flight.
func (m *bareMember) answered(d time.Duration) (*kmsg.JoinGroupResponse, bool) {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = 5
	if err := readResponse(m.conn, d, resp); err != nil {
		return nil, false
	}
	return resp, true
}

// rejoinUntilAnswered sends a JoinGroup and, while no answer comes within
// 2s, sends it again on a fresh socket (as a client gives up and rejoins).
func (m *bareMember) rejoinUntilAnswered(ctx context.Context, t *testing.T) *kmsg.JoinGroupResponse {
	t.Helper()
	start := time.Now()
	m.send(t, m.id)
	for {
		if resp, ok := m.answered(2 * time.Second); ok {
			return resp
		}
		if ctx.Err() != nil {
			t.Fatalf("the group is still rebalancing %s after the live member rejoined: the dead member was not evicted", time.Since(start))
		}
		m.reconnect(ctx, t)
		m.send(t, m.id)
	}
}

// sync sends the leader's SyncGroup (no assignments) for generation and
// reads its answer, which makes the group stable.
func (m *bareMember) sync(t *testing.T, generation int32) {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 3
	req.Group = group
	req.Generation = generation
	req.MemberID = m.id
	m.corr++
	if _, err := m.conn.Write(m.format.AppendRequest(nil, req, m.corr)); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = 3
	if err := readResponse(m.conn, 10*time.Second, resp); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("sync: error code %d", resp.ErrorCode)
	}
}

// syncBuffer is a bytes.Buffer safe for the reaper's goroutine and the test.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed and replaced at each Write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.b.Write(p)
}

// waitFor waits until the buffer holds s, reporting false if ctx ends first.
func (b *syncBuffer) waitFor(ctx context.Context, s string) bool {
	for {
		b.mu.Lock()
		if strings.Contains(b.b.String(), s) {
			b.mu.Unlock()
			return true
		}
		if b.written == nil {
			b.written = make(chan struct{})
		}
		written := b.written
		b.mu.Unlock()
		select {
		case <-written:
		case <-ctx.Done():
			return false
		}
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
