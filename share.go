package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share-group mode (KIP-932). Records come from a Kafka share group instead
// of a consumer group: the broker hands each record to one member under an
// acquisition lock, counts its deliveries, and takes an acknowledgement per
// record (accept, release, reject, renew) instead of a committed offset. Any
// number of workers share one partition. Every record then runs the same path
// as in consumer-group mode (accept -> dispatch -> claim -> runJob -> settle
// -> report): the Redis lease, fence, idempotency record and sagas decide
// what runs and what is committed; the acknowledgement only tells the broker
// that the record needs no further delivery.
//
// Acknowledgements:
//   - accept: once the record's outcome is recorded: completed, duplicate
//     replayed, failed for good (dead-lettered and recorded), cancelled, or
//     poison copied to the dead-letter topic (finish);
//   - release: a retryable failure with no backoff (a RetryAfterError of 0),
//     or one that ends while the worker shuts down (report,
//     shareReleaseNow): the broker delivers the record again, to any member,
//     with its delivery count raised. A retryable failure with a backoff
//     (WithBackoff, RetryAfterError) is held instead: parked in the round
//     like a held key, its lock renewed, and claimed again on this worker
//     when the backoff ends, as in consumer-group mode (the attempt count in
//     Redis bounds it, WithMaxAttempts). The attempt at the group's
//     share.delivery.count.limit fails for good whatever its attempt (the
//     broker would archive the record silently);
//   - renew: every record the worker holds, every renew interval, while its
//     job runs or it waits (a held key, a paused type, a limit group, after a
//     lost lease), so that its acquisition lock does not lapse under a live
//     job (WithOrderedKeys is refused in share mode: nothing waits behind an
//     ordered key);
//   - at shutdown, nothing for most records: closing the client releases
//     what is left. A record left at its last delivery (lastDelivery) would
//     be archived by the broker on that release, with no trace, so shutdown
//     copies it to the dead-letter topic first and accepts it once the copy
//     exists (shareEndHeld): parked for a held key, a lost lease, a paused
//     type or a limit group, waiting on its key's probe, polled and not
//     dispatched, or of a job still running past the drain. dlq replay
//     brings it back.
//
// The catch, from franz-go: a record of the last poll that has no final
// acknowledgement when PollRecords is called again is accepted
// automatically, and a renew does not carry over a poll. Renewing before each
// poll does not help, so the dispatcher does not poll while it holds a record
// of the last poll (shareLoop): a poll takes up to the free pool slots, the
// round's records run, park and are acknowledged, and only an empty round
// lets the next poll happen. No record is ever acknowledged by the
// automatic accept while it runs. The cost: a slow job holds its worker's
// next poll (other workers keep polling; add workers, not concurrency, for
// jobs of very uneven length). A paused job type's records are held the
// same way (holdPaused), so a worker holding one polls nothing, of any type,
// until the type is resumed; it warns once per pause (warnSharePaused).
// Releasing them would raise their delivery count towards the broker's
// archiving, and only a final acknowledgement keeps a record from the next
// poll's accept, so the worker keeps holding them and says so.
//
// Takeover: a killed worker's connection closes, and the broker releases
// its records at once; a stalled one's records come back when their
// acquisition lock lapses. The next worker's claim finds the key's lease
// expired (a takeover with a newer fence) or still live (held: it waits for
// the lease's remaining time, renewing the record's lock). The lease TTL sets
// the lock: the worker sets the group's share.record.lock.duration.ms to the
// longest lease TTL plus one renew interval (shareLockFor), so that a record
// whose lock lapsed has a lapsed lease too, and refuses to start when the
// broker does not allow it. A record comes back within lock + TTL.

// WithShareGroup consumes the topics through the Kafka share group name
// (KIP-932, Kafka 4.2 or later) instead of a consumer group: any number of
// workers take records of one partition, one record at a time. The worker
// sets the group's share.auto.offset.reset (earliest),
// share.renew.acknowledge.enable (true) and share.record.lock.duration.ms
// (the longest lease TTL plus a third) when it starts. See docs/kafka.md.
// Default "": consumer-group mode ([WithGroup]).
func WithShareGroup(name string) Opt { return optFunc(func(c *config) { c.shareGroup = name }) }

// ErrShareLock is returned by [Worker.Start] in share-group mode when the
// broker refuses the acquisition lock duration the lease TTL needs
// (share.record.lock.duration.ms outside the brokers'
// group.share.min.record.lock.duration.ms and
// group.share.max.record.lock.duration.ms).
var ErrShareLock = errors.New("leasehold: share group lock duration refused")

// checkShare refuses settings that contradict share-group mode: a share
// group delivers a key's records to any worker in any order, and it is not a
// consumer group whose protocol could be chosen.
func (c *config) checkShare() error {
	switch {
	case c.shareGroup == "":
		return nil
	case c.ordered:
		return errors.New("leasehold: WithOrderedKeys needs a consumer group: a share group delivers records in no order; drop one of WithOrderedKeys and WithShareGroup")
	case c.groupProtocol == GroupProtocolConsumer:
		return errors.New("leasehold: WithGroupProtocol applies to consumer groups, not to WithShareGroup; drop one of them")
	}
	return nil
}

// shareState is the share-group mode's state: the records of the last poll
// that have no final acknowledgement yet (the round).
//
// Renewals run on the dispatcher's goroutine while it runs (shareRenew,
// from shareAcquire and shareGather, at most every renew interval), then on
// a goroutine of their own until shutdown's final flush (shareRenewer): the
// dispatcher may write a record's Context (the tracer's span) and franz-go
// reads it to find the record's ack state, so the two never run at once.
type shareState struct {
	mu      sync.Mutex
	round   map[*kgo.Record]*delivery
	every   time.Duration // the renew interval
	renewed time.Time     // the last renewal (the dispatcher's, then the renewer's)
	limit   int32         // the group's share.delivery.count.limit (shareDeliveryLimit)
	lock    time.Duration // the acquisition lock duration set on the group
	stop    chan struct{} // closed when the renewer stops (stopShare)
	done    chan struct{} // closed by the renewer when it has stopped
	once    sync.Once
	errs    fetchErrLog                      // the fetch errors logged (shareOpts keeps the retryable ones)
	ack     func(*kgo.Record, kgo.AckStatus) // (*kgo.Record).Ack; a test's stand-in

	// pauseWarned is, per paused job type, the pause whose held records
	// were logged (warnSharePaused); the dispatcher's.
	pauseWarned map[string]time.Time
}

// shareLockFor returns the acquisition lock duration for the longest lease
// TTL: the TTL plus one renew interval (a third of it), rounded up to a
// second. A record whose lock lapsed then has its lease lapsed too: the next
// claim is a takeover, not a wait.
func shareLockFor(ttl time.Duration) time.Duration {
	return (ttl + ttl/3 + time.Second - 1).Truncate(time.Second)
}

// longestLeaseTTL returns the longest lease TTL of the worker's jobs.
func (w *Worker) longestLeaseTTL() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	ttl := w.cfg.leaseTTL
	for _, r := range w.handlers {
		ttl = max(ttl, r.cfg.leaseTTL)
	}
	return ttl
}

// shareOpts returns the share-group consumer options: a poll takes at most
// the pool's size, strictly (the broker may not hand more). Retryable
// per-partition fetch errors are kept (franz-go strips them by default): a
// share session gives no other sign of a partition that fails to fetch, so
// the poll logs them, at most once a minute each (fetchErrLog).
func (w *Worker) shareOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.ShareGroup(w.cfg.shareGroup),
		kgo.ConsumeTopics(w.cfg.topics...),
		kgo.ShareMaxRecords(int32(min(w.cfg.concurrency, 1<<20))), //nolint:gosec // bounded above
		kgo.ShareMaxRecordsStrict(),
		kgo.ShareAckCallback(w.onShareAcks),
		kgo.KeepRetryableFetchErrors(),
	}
}

// fetchErrEvery is how often a fetch error of one topic, partition and kind
// is logged at most in share mode.
const fetchErrEvery = time.Minute

// fetchErrKeys bounds the fetch errors fetchErrLog remembers.
const fetchErrKeys = 1024

// fetchErrLog limits the fetch errors logged in share mode, where retryable
// ones are kept: a broker restart answers every fetch of every partition
// with one until it is back. One line per topic, partition and error kind
// (a Kafka error code's name, else the error's text) per fetchErrEvery,
// with the count of those not logged since the last line.
type fetchErrLog struct {
	mu   sync.Mutex
	seen map[fetchErrKey]*fetchErrSeen
}

type fetchErrKey struct {
	topic     string
	partition int32
	kind      string
}

type fetchErrSeen struct {
	logged     time.Time
	suppressed int
}

// allow reports whether the error may be logged now and how many of its
// kind were not logged since its last line.
func (l *fetchErrLog) allow(topic string, p int32, err error, now time.Time) (suppressed int, ok bool) {
	k := fetchErrKey{topic: topic, partition: p, kind: fetchErrKind(err)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = make(map[fetchErrKey]*fetchErrSeen)
	}
	e := l.seen[k]
	if e != nil && now.Sub(e.logged) < fetchErrEvery {
		e.suppressed++
		return 0, false
	}
	if e == nil {
		if len(l.seen) >= fetchErrKeys {
			l.prune(now)
		}
		e = &fetchErrSeen{}
		l.seen[k] = e
	}
	suppressed, e.logged, e.suppressed = e.suppressed, now, 0
	return suppressed, true
}

// prune forgets the errors last logged more than fetchErrEvery ago, and
// everything if that is not enough (a line too many, not a growing map).
func (l *fetchErrLog) prune(now time.Time) {
	for k, e := range l.seen {
		if now.Sub(e.logged) >= fetchErrEvery {
			delete(l.seen, k)
		}
	}
	if len(l.seen) >= fetchErrKeys {
		clear(l.seen)
	}
}

// fetchErrKind names err for fetchErrLog: a Kafka error's name, else its
// text, cut to 80 bytes.
func fetchErrKind(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// logFetchError logs a fetch error of the poll: every one in consumer-group
// mode (franz-go strips the retryable ones there), at most one a minute per
// topic, partition and kind in share mode.
func (w *Worker) logFetchError(topic string, p int32, err error) {
	attrs := []any{slog.String("topic", topic), slog.Int("partition", int(p)), slog.Any("err", err)}
	if w.share != nil {
		n, ok := w.share.errs.allow(topic, p, err, time.Now())
		if !ok {
			return
		}
		attrs = append(attrs, slog.Int("not_logged_since_last", n))
	}
	w.log.Warn("fetch error", attrs...)
}

// onShareAcks logs acknowledgements the broker refused (the record is then
// delivered again after its lock; its claim replays or takes it over).
func (w *Worker) onShareAcks(_ *kgo.Client, res kgo.ShareAckResults) {
	for _, r := range res {
		if r.Err != nil {
			w.log.Warn("share acknowledgement refused", slog.String("topic", r.Topic),
				slog.Int("partition", int(r.Partition)), slog.Any("err", r.Err))
		}
	}
}

// startShare sets the share group's configs (see WithShareGroup), reads
// its delivery count limit and prepares the round.
func (w *Worker) startShare(ctx context.Context, kopts []kgo.Opt) error {
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("leasehold: kafka client: %w", err)
	}
	defer cl.Close()
	if err := w.setShareReset(ctx, cl); err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	group := w.cfg.shareGroup
	err = alterGroupConfigs(actx, cl, group, map[string]string{"share.renew.acknowledge.enable": "true"})
	if err != nil {
		w.log.Warn("could not enable lock renewals on the share group (share.renew.acknowledge.enable, Kafka "+
			"4.2+): a job running past its record's lock leaves the record to another worker, which waits for "+
			"the lease", slog.String("share_group", group), slog.Any("err", err))
	}
	w.shareTimeouts(actx, cl)
	lock, err := w.shareLock(actx, cl)
	if err != nil {
		return err
	}
	w.share = &shareState{round: make(map[*kgo.Record]*delivery), lock: lock, every: min(w.shortestLeaseTTL(), lock) / 3,
		stop: make(chan struct{}), done: make(chan struct{}), ack: (*kgo.Record).Ack}
	w.share.limit = w.shareDeliveryLimit(ctx, cl)
	w.log.Info("share group configured", slog.String("share_group", group),
		slog.Duration("lock_duration", lock), slog.Int("delivery_limit", int(w.share.limit)))
	return nil
}

// defaultShareDeliveryLimit is Kafka's group.share.delivery.count.limit.
const defaultShareDeliveryLimit = 5

// shareDeliveryLimit reads the share group's delivery count limit: the
// group's share.delivery.count.limit, else the brokers'
// group.share.delivery.count.limit, which is in effect for a group that
// sets none (kfake describes such a group config without a value). When
// neither can be read it warns and takes Kafka's default: taken as none, a
// record failing at the limit was released, and the broker archived it
// without a trace (lastDelivery).
func (w *Worker) shareDeliveryLimit(ctx context.Context, cl *kgo.Client) int32 {
	ctx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	v, err := describeGroupConfig(ctx, cl, w.cfg.shareGroup, "share.delivery.count.limit")
	if err != nil {
		v, err = describeBrokerConfig(ctx, cl, "group.share.delivery.count.limit")
	}
	n, perr := strconv.ParseInt(v, 10, 32)
	if err == nil && perr == nil && n > 0 {
		return int32(n)
	}
	w.log.Warn("could not read the share group's delivery count limit; taking Kafka's default: a job's attempt "+
		"at that delivery fails for good", slog.String("share_group", w.cfg.shareGroup),
		slog.Int("delivery_limit", defaultShareDeliveryLimit), slog.Any("err", cmp.Or(err, perr)))
	return defaultShareDeliveryLimit
}

// describeBrokerConfig reads one config of a broker of the cluster (its
// value in effect, defaults included).
func describeBrokerConfig(ctx context.Context, cl *kgo.Client, name string) (string, error) {
	adm := kadm.NewClient(cl) // not closed: that would close cl
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return "", err
	}
	if len(brokers) == 0 {
		return "", errors.New("leasehold: no broker listed")
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	if err != nil {
		return "", err
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return "", rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key == name && c.Value != nil {
				return *c.Value, nil
			}
		}
	}
	return "", fmt.Errorf("leasehold: broker config %s not described", name)
}

// setShareReset sets the share group's share.auto.offset.reset to earliest,
// so that a new group starts at the topics' first records. The brokers must
// answer before the first fetch: while they cannot be reached (no answer, or
// an error Kafka calls retriable) it tries again, 0.5s to 5s apart, logging
// each try, until they answer or ctx ends. A worker started during a broker
// outage waits it out, as a consumer-group worker's client does, instead of
// exiting. An error from Kafka itself (an old broker, a refused config, no
// permission) fails at once.
func (w *Worker) setShareReset(ctx context.Context, cl *kgo.Client) error {
	group := w.cfg.shareGroup
	wait := 500 * time.Millisecond
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, topicWait)
		err := alterGroupConfigs(actx, cl, group, map[string]string{"share.auto.offset.reset": "earliest"})
		cancel()
		if err == nil {
			return nil
		}
		var ke *kerr.Error
		if errors.As(err, &ke) && !ke.Retriable {
			return fmt.Errorf("leasehold: share group %q: setting share.auto.offset.reset: %w "+
				"(share groups need Kafka 4.2 or later)", group, err)
		}
		if ctx.Err() != nil {
			return shareWaitErr(ctx, group, err)
		}
		w.log.Warn("kafka does not answer; the worker starts once the share group's configs are set",
			slog.String("share_group", group), slog.Int("try", try), slog.Duration("next_try_in", wait), slog.Any("err", err))
		select {
		case <-ctx.Done():
			return shareWaitErr(ctx, group, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// shareWaitErr is setShareReset's error when its context ended before Kafka
// answered: why it ended, and the last try's error.
func shareWaitErr(ctx context.Context, group string, last error) error {
	return fmt.Errorf("leasehold: share group %q: waiting for kafka to set share.auto.offset.reset: %w (last: %w)",
		group, context.Cause(ctx), last)
}

// shareTimeouts sets the share group's session timeout and heartbeat
// interval (group configs share.session.timeout.ms and
// share.heartbeat.interval.ms) to the worker's Kafka session timeout and
// heartbeat interval, derived from the lease TTL as in consumer-group mode.
// The share group assigns each partition to some of its members; a killed
// member keeps its partitions until its session times out, and nobody
// fetches them meanwhile: at Kafka's default (45s) a chaos run's drain
// stalled for that long after every kill. A refusal (the brokers'
// group.share.min.session.timeout.ms and group.share.min.heartbeat.interval.ms,
// 45s and 5s by default) is logged, not fatal.
func (w *Worker) shareTimeouts(ctx context.Context, cl *kgo.Client) {
	session, _ := cl.OptValue(kgo.SessionTimeout).(time.Duration)
	hb, _ := cl.OptValue(kgo.HeartbeatInterval).(time.Duration)
	if session <= 0 || hb <= 0 {
		return
	}
	group := w.cfg.shareGroup
	err := alterGroupConfigs(ctx, cl, group, map[string]string{
		"share.session.timeout.ms":    strconv.FormatInt(session.Milliseconds(), 10),
		"share.heartbeat.interval.ms": strconv.FormatInt(hb.Milliseconds(), 10),
	})
	if err != nil {
		w.log.Warn("could not set the share group's session timeout and heartbeat interval; the broker's defaults "+
			"apply (45s and 5s), so a killed worker's partitions go unfetched until its session times out: lower "+
			"group.share.min.session.timeout.ms and group.share.min.heartbeat.interval.ms on the brokers",
			slog.String("share_group", group), slog.Duration("session_timeout", session),
			slog.Duration("heartbeat_interval", hb), slog.Any("err", err))
	}
}

// shareLock sets the group's acquisition lock duration from the longest
// lease TTL (shareLockFor). When the broker refuses it (outside its
// group.share.min/max.record.lock.duration.ms), the lock in effect is
// accepted if it is at least the TTL (a stalled worker's records then come
// back later than they could), and refused with ErrShareLock if shorter:
// a record would come back while its lease lives and wait for it.
func (w *Worker) shareLock(ctx context.Context, cl *kgo.Client) (time.Duration, error) {
	ttl := w.longestLeaseTTL()
	want := shareLockFor(ttl)
	group := w.cfg.shareGroup
	err := alterGroupConfigs(ctx, cl, group, map[string]string{
		"share.record.lock.duration.ms": strconv.FormatInt(want.Milliseconds(), 10)})
	if err == nil {
		return want, nil
	}
	v, derr := describeGroupConfig(ctx, cl, group, "share.record.lock.duration.ms")
	ms, perr := strconv.ParseInt(v, 10, 64)
	if derr != nil || perr != nil || time.Duration(ms)*time.Millisecond < ttl {
		return 0, fmt.Errorf("%w: share.record.lock.duration.ms=%d for a lease TTL of %v (%w); allow it with the "+
			"brokers' group.share.min.record.lock.duration.ms and group.share.max.record.lock.duration.ms, or "+
			"change the lease TTL", ErrShareLock, want.Milliseconds(), ttl, err)
	}
	have := time.Duration(ms) * time.Millisecond
	w.log.Warn("the brokers refused the share group's lock duration; the one in effect is longer than the lease "+
		"TTL, so a stalled worker's records come back later than its leases lapse", slog.String("share_group", group),
		slog.Duration("wanted", want), slog.Duration("lock_duration", have), slog.Any("err", err))
	return have, nil
}

// alterGroupConfigs sets configs on group with IncrementalAlterConfigs.
func alterGroupConfigs(ctx context.Context, cl *kgo.Client, group string, configs map[string]string) error {
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for name, v := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &v
		res.Configs = append(res.Configs, c)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if r.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *r.ErrorMessage)
			}
			return err
		}
	}
	return nil
}

// describeGroupConfig reads one config of group (its value in effect,
// defaults included).
func describeGroupConfig(ctx context.Context, cl *kgo.Client, group, name string) (string, error) {
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	res.ConfigNames = []string{name}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return "", err
		}
		for _, c := range r.Configs {
			if c.Name == name && c.Value != nil {
				return *c.Value, nil
			}
		}
	}
	return "", fmt.Errorf("leasehold: group config %s not described", name)
}

// shareLoop is the dispatcher of share-group mode: loop's shape, with a
// poll only when the last poll's records are all acknowledged (see the
// file's comment).
func (w *Worker) shareLoop() {
	defer func() { go w.shareRenewer() }()
	for {
		if !w.shareAcquire() {
			return
		}
		n := 1
		for n < w.cfg.concurrency && w.sem.TryAcquire(1) {
			n++
		}
		batch, stop := w.shareGather(&n)
		if stop {
			w.sem.Release(int64(n))
			return
		}
		used := w.dispatch(batch)
		w.sem.Release(int64(n - used))
	}
}

// shareGather returns up to *n deliveries to claim: due parked ones while
// the round holds records, else freshly polled ones, after taking every
// pool slot free by then (*n grows). stop is true when the worker is
// shutting down.
func (w *Worker) shareGather(n *int) (batch []*delivery, stop bool) {
	for {
		if w.stopCtx.Err() != nil {
			return nil, true
		}
		if batch = w.sched.takeDue(*n, time.Now()); len(batch) > 0 {
			return batch, false
		}
		if w.share.pending() > 0 {
			w.shareRenew()
			wait := min(maxPollWait, w.share.every)
			if due := w.sched.nextDue(); !due.IsZero() {
				wait = min(wait, max(time.Until(due), time.Millisecond))
			}
			w.waitWake(wait)
			continue
		}
		for *n < w.cfg.concurrency && w.sem.TryAcquire(1) {
			*n++
		}
		polled, closed := w.poll(*n, maxPollWait)
		if closed {
			return polled, true
		}
		if len(polled) > 0 {
			return polled, false
		}
	}
}

// pending returns how many records of the round have no final
// acknowledgement.
func (s *shareState) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.round)
}

// shareTrack adds a polled record's delivery to the round.
func (w *Worker) shareTrack(d *delivery) {
	w.share.mu.Lock()
	w.share.round[d.rec] = d
	w.share.mu.Unlock()
}

// shareAck acknowledges d's record with a final status and takes it out of
// the round; the dispatcher polls again once the round is empty. The
// acknowledgement is made before the record leaves the round (under its
// lock): the dispatcher polls as soon as it sees the round empty, and the
// poll accepts every record of the last poll that has no final
// acknowledgement yet, so a release made after the record left the round
// could come too late, its record accepted and its retry lost.
func (w *Worker) shareAck(d *delivery, status kgo.AckStatus) {
	w.share.mu.Lock()
	if _, ok := w.share.round[d.rec]; ok {
		w.share.ack(d.rec, status)
		delete(w.share.round, d.rec)
	}
	empty := len(w.share.round) == 0
	w.share.mu.Unlock()
	w.sched.finished(d)
	if empty {
		w.wakePoll()
	}
}

// lastDelivery reports whether d is its record's last delivery in share
// mode: a release would let the broker archive it unrecorded, so its
// failure is final.
func (w *Worker) lastDelivery(d *delivery) bool {
	return w.share != nil && w.share.limit > 0 && d.rec.DeliveryCount() >= w.share.limit
}

// shareReleaseNow reports whether a retryable failure in share mode
// releases its record to the broker at once: when it has no backoff, or the
// worker is shutting down. Otherwise the record is parked for its backoff
// like any retry (report): it stays in the round, so its lock is renewed
// and the dispatcher does not poll (no automatic accept) until it is
// acknowledged. The cost: while a record waits out its backoff, its worker
// takes no new records (the jobs it runs go on; other workers poll).
func (w *Worker) shareReleaseNow(delay time.Duration) bool {
	return w.share != nil && (delay <= 0 || w.stopCtx.Err() != nil)
}

// shareRenew renews the acquisition lock of every record in the round if
// a renew interval (a third of the shortest lease TTL, at most a third of
// the lock) has passed since the last renewal. A renew the broker has not
// confirmed yet is skipped by franz-go; the next one covers it.
func (w *Worker) shareRenew() {
	if time.Since(w.share.renewed) < w.share.every {
		return
	}
	w.share.renewed = time.Now()
	w.share.mu.Lock()
	recs := make([]*kgo.Record, 0, len(w.share.round))
	for r := range w.share.round {
		recs = append(recs, r)
	}
	w.share.mu.Unlock()
	for _, r := range recs {
		w.share.ack(r, kgo.AckRenew)
	}
}

// shareAcquire waits for a pool slot, renewing the round meanwhile (all
// slots may be running jobs). It returns false when the worker stops.
func (w *Worker) shareAcquire() bool {
	for {
		ctx, cancel := context.WithTimeout(w.stopCtx, w.share.every)
		err := w.sem.Acquire(ctx, 1)
		cancel()
		if err == nil {
			return true
		}
		if w.stopCtx.Err() != nil {
			return false
		}
		w.shareRenew()
	}
}

// shareRenewer renews the round after the dispatcher stopped, while
// shutdown drains the running jobs, until commitFinished stops it.
func (w *Worker) shareRenewer() {
	defer close(w.share.done)
	t := time.NewTicker(w.share.every/4 + time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.share.stop:
			return
		case <-t.C:
			w.shareRenew()
		}
	}
}

// commitFinished is shutdown's step 4: in consumer-group mode it commits
// the marked offsets; in share mode it stops the renewer, if shareEndHeld
// has not, and flushes the acknowledgements (records left unacknowledged
// are released by the client's close).
func (w *Worker) commitFinished(ctx context.Context) error {
	if w.share == nil {
		return w.cfg.commitMarked(ctx, w.cl)
	}
	w.stopShareRenewer()
	return w.cl.FlushAcks(ctx)
}

// stopShareRenewer stops the renewer and waits until it has stopped; a
// second call returns at once.
func (w *Worker) stopShareRenewer() {
	w.share.once.Do(func() { close(w.share.stop) })
	<-w.share.done
}

// shareEndHeld is shutdown's step in share mode between the drain and the
// final flush. Closing the client releases every record the worker still
// holds (parked: a held key, a lost lease, a paused type, a limit group;
// waiting on its key's probe; polled and not dispatched), and the broker
// archives a released record that was at the group's delivery count limit:
// gone, with no dead-letter copy. So each record held at its last delivery
// (lastDelivery) is copied to the dead-letter topic, with the copy decided
// for it if there was one (a failure whose copy the stop cut short), else
// as ReasonDeliveryLimit, and accepted once its copy exists; the others are
// left to the close, as before. The step, the wait for the copies the stop
// cut short included, gets finalCommitTimeout, past ctx's end too (a copy
// not written loses the record), and no more. The renewer stops
// first: starting a record's span writes its Context, which franz-go reads
// to renew it. A record whose lock lapses meanwhile is archived and its
// accept refused; its copy stands. A job still running at its last delivery
// (its handler ignored the drain's cancellation) is copied too: its attempt
// may yet land, and the copy is then a spare that a replay refuses as
// needs-reset, but if it does not, the record would be archived with no
// trace. It returns the deliveries of parked it did not dead-letter, whose
// attempts shutdown ends as revoked.
func (w *Worker) shareEndHeld(ctx context.Context, parked []*delivery) []*delivery {
	if w.share == nil {
		return parked
	}
	w.stopShareRenewer()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalCommitTimeout)
	defer cancel()
	w.waitAux(dctx) // copies the stop cut short: their records are finished, or still held
	last, running := w.shareHeldLast()
	if len(last) == 0 {
		return parked
	}
	for _, d := range last {
		reason, cause := w.shareLastCopy(d, running[d])
		w.deadLetterUntil(dctx, d, reason, cause, nil)
	}
	w.waitAux(dctx)
	w.logHeldLeft(last)
	copied := make(map[*delivery]bool, len(last))
	for _, d := range last {
		copied[d] = true
	}
	return slices.DeleteFunc(parked, func(d *delivery) bool { return copied[d] })
}

// waitAux waits for the dead-letter writers to end, or for ctx to: a
// produce under way when the broker stops answering ends with its request
// timeouts, and shutdown's bound must not wait for it.
func (w *Worker) waitAux(ctx context.Context) {
	done := make(chan struct{})
	go func() { w.aux.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// shareHeldLast returns the deliveries of the round that are their
// record's last, and which of them are of jobs still running.
func (w *Worker) shareHeldLast() (last []*delivery, running map[*delivery]bool) {
	active := make(map[*delivery]bool)
	w.activeMu.Lock()
	for j := range w.active {
		active[j.d] = true
	}
	w.activeMu.Unlock()
	running = make(map[*delivery]bool)
	w.share.mu.Lock()
	defer w.share.mu.Unlock()
	for _, d := range w.share.round {
		if w.lastDelivery(d) {
			last = append(last, d)
			running[d] = active[d]
		}
	}
	return last, running
}

// shareDecided keeps on d, in share mode, the dead-letter copy decided for
// it, for shareEndHeld to write should the worker stop before it is.
func (w *Worker) shareDecided(d *delivery, reason string, cause error) {
	if w.share == nil {
		return
	}
	w.share.mu.Lock()
	d.dlqReason, d.dlqCause = reason, cause
	w.share.mu.Unlock()
}

// shareLastCopy returns the reason and cause of the dead-letter copy of d,
// held at its last delivery when the worker stopped (running: its job had
// not returned): the copy decided for it, if any, else ReasonDeliveryLimit.
func (w *Worker) shareLastCopy(d *delivery, running bool) (reason string, cause error) {
	w.share.mu.Lock()
	reason, cause = d.dlqReason, d.dlqCause
	w.share.mu.Unlock()
	if reason != "" {
		return reason, cause
	}
	held := "held without an outcome"
	if running {
		held = "its job still running (the handler ignored the drain's cancellation)"
	}
	return ReasonDeliveryLimit, fmt.Errorf("leasehold: %s at share delivery %d of %d "+
		"(share.delivery.count.limit) when the worker stopped; released, the broker would have archived it",
		held, d.rec.DeliveryCount(), w.share.limit)
}

// logHeldLeft warns of each record of last still in the round: its copy
// was not written within shutdown's bound, and the broker archives it when
// the client's close releases it.
func (w *Worker) logHeldLeft(last []*delivery) {
	w.share.mu.Lock()
	var left []*delivery
	for _, d := range last {
		if _, ok := w.share.round[d.rec]; ok {
			left = append(left, d)
		}
	}
	w.share.mu.Unlock()
	for _, d := range left {
		w.log.Warn("a record at its last share delivery could not be dead-lettered before the worker stopped; "+
			"the broker archives it", slog.String("key", d.key), slog.String("topic", d.rec.Topic),
			slog.Int("partition", int(d.rec.Partition)), slog.Int64("offset", d.rec.Offset))
	}
}

// warnSharePaused logs, once per pause of typ (paused at at), that this
// share-mode worker holds records of the paused type: it polls no new
// records, of any type, until the type is resumed (the dispatcher does not
// poll while it holds records of the last poll; a release would raise their
// delivery count). Called by the dispatcher (holdPaused).
func (w *Worker) warnSharePaused(typ string, at time.Time) {
	if w.share == nil {
		return
	}
	if last, ok := w.share.pauseWarned[typ]; ok && last.Equal(at) {
		return
	}
	if w.share.pauseWarned == nil {
		w.share.pauseWarned = make(map[string]time.Time)
	}
	w.share.pauseWarned[typ] = at
	w.log.Warn("holding records of a paused job type: in share mode this worker polls no new records, of any "+
		"type, until the type is resumed", slog.String("type", typ), slog.Time("paused_at", at),
		slog.String("share_group", w.cfg.shareGroup))
}
