package leasehold

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka group timeouts the worker derives from its lease TTLs when the
// [WithKafka] options set none (see [SessionTimeoutFor]).
const (
	// MinSessionTimeout is the shortest session timeout the worker derives:
	// Apache Kafka's and kfake's default group.min.session.timeout.ms, below
	// which a broker refuses a member.
	MinSessionTimeout = 6 * time.Second
	// MaxSessionTimeout is the longest session timeout the worker derives:
	// franz-go's own default (session.timeout.ms=45000).
	MaxSessionTimeout = 45 * time.Second
	// MaxHeartbeatInterval is the longest heartbeat interval the worker
	// derives: franz-go's own default (heartbeat.interval.ms=3000).
	MaxHeartbeatInterval = 3 * time.Second
)

// SessionTimeoutFor returns the Kafka group session timeout a worker uses
// when its [WithKafka] options set no kgo.SessionTimeout: half its shortest
// lease TTL (the worker's [WithLeaseTTL] or a job type's shorter
// [WithJobLeaseTTL]), at least [MinSessionTimeout] and at most
// [MaxSessionTimeout]; 7.5s with the default 15s TTL.
//
// Why: a worker that is killed or stalled stops renewing its leases and
// stops heartbeating to Kafka at once. Its leases lapse at most one lease
// TTL later; its partitions move to a live worker only when its session
// times out and a live member learns of the rebalance on its next heartbeat
// ([HeartbeatIntervalFor]) and fetches the partition (up to the fetch max
// wait, 5s by default). With half the TTL, the partition is back in live
// hands by about the time the lease lapses, and the new owner, which found
// the key held, claims it again right when the lease runs out: the job runs
// again within the lease TTL, not after franz-go's 45s session.
func SessionTimeoutFor(leaseTTL time.Duration) time.Duration {
	return min(max(leaseTTL/2, MinSessionTimeout), MaxSessionTimeout)
}

// HeartbeatIntervalFor returns the Kafka group heartbeat interval a worker
// uses when its [WithKafka] options set no kgo.HeartbeatInterval: a third of
// the session timeout (Kafka's advice), at most [MaxHeartbeatInterval].
func HeartbeatIntervalFor(session time.Duration) time.Duration {
	return min(session/3, MaxHeartbeatInterval)
}

// shortestLeaseTTL returns the shortest lease TTL of the worker's jobs: the
// worker's own, or a registered job type's shorter one.
func (w *Worker) shortestLeaseTTL() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	ttl := w.cfg.leaseTTL
	for _, r := range w.handlers {
		if r.cfg.leaseTTL > 0 {
			ttl = min(ttl, r.cfg.leaseTTL)
		}
	}
	return ttl
}

// groupTimeouts returns kopts (the base options, then the user's) with the
// derived session timeout and heartbeat interval put before them, so that a
// kgo.SessionTimeout or kgo.HeartbeatInterval the user gave wins. It reads
// the values that take effect from a client built with the options and
// closed at once (it connects to nothing); a heartbeat interval of 0 stands
// for "not set" there. It logs them, and warns when a session timeout the
// user set is longer than the shortest lease TTL: a dead worker's jobs then
// wait for the session, not the lease.
func (w *Worker) groupTimeouts(kopts []kgo.Opt) (opts []kgo.Opt, session, hb time.Duration, err error) {
	ttl := w.shortestLeaseTTL()
	derived := SessionTimeoutFor(ttl)
	opts = append([]kgo.Opt{kgo.SessionTimeout(derived), kgo.HeartbeatInterval(0)}, kopts...)
	probe, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("leasehold: kafka client: %w", err)
	}
	session, _ = probe.OptValue(kgo.SessionTimeout).(time.Duration)
	hb, _ = probe.OptValue(kgo.HeartbeatInterval).(time.Duration)
	probe.Close()
	hbDerived := hb == 0
	if hbDerived {
		hb = HeartbeatIntervalFor(session)
		opts = append(opts, kgo.HeartbeatInterval(hb))
	}
	if hb >= session {
		return nil, 0, 0, fmt.Errorf("leasehold: kafka heartbeat interval %v is not below the session timeout %v: "+
			"lower kgo.HeartbeatInterval or leave it unset", hb, session)
	}
	attrs := []any{slog.Duration("session_timeout", session), slog.Bool("session_derived", session == derived),
		slog.Duration("heartbeat_interval", hb), slog.Duration("lease_ttl", ttl)}
	switch {
	case session <= ttl:
		w.log.Info("kafka group timeouts: a dead worker's jobs are taken over when their leases lapse", attrs...)
	case session != derived:
		w.log.Warn("kafka session timeout is longer than the lease TTL: a killed or stalled worker's jobs "+
			"are taken over only after its session times out, not when their leases lapse; "+
			"leave kgo.SessionTimeout unset to derive it from the lease TTL", attrs...)
	default:
		w.log.Info("kafka group timeouts: the lease TTL is shorter than the broker's smallest session timeout, "+
			"so a dead worker's jobs are taken over after its session times out; lower the broker's "+
			"group.min.session.timeout.ms and set kgo.SessionTimeout to go below it", attrs...)
	}
	return opts, session, hb, nil
}

// leaveTimeout bounds the group leave of a shutdown.
const leaveTimeout = 5 * time.Second

// leaveGroup leaves the consumer group within leaveTimeout. When the leave
// does not finish in time it cancels the client's own context, so that the
// Close that follows does not wait on a broker that no longer answers:
// franz-go's Close leaves with that context, and a member whose coordinator
// stopped answering kept retrying its heartbeats and then its leave for
// minutes (TestConsumerGroupProtocolTakeover). A member that could not leave
// is evicted when its session times out, as a killed one is.
func (w *Worker) leaveGroup(ctx context.Context) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	if err := w.cl.LeaveGroupContext(lctx); err != nil {
		w.log.Warn("could not leave the consumer group in time; closing the Kafka client without it (the broker "+
			"evicts this member when its session times out)", slog.Duration("waited", leaveTimeout), slog.Any("err", err))
		w.kcancel()
	}
}
