package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/lua"
)

// Dead-lettering writes one copy per original record, across redelivery,
// rebalances and crashes. Per original record (dead-letter topic + original
// cluster ID, topic ID and topic/partition/offset: see recordOrigin, so that
// a new cluster or a recreated topic, whose offsets start at 0 again, never
// finds an old record's marker) the worker keeps a marker in Redis, kept for the
// retention, and serializes writers with a lease of the same name
// ([deadLetterID]), taken from the worker's lease manager (renewed like a
// job's lease, expiring after the lease TTL when its holder dies):
//
//  1. Take the lease. Another holder: wait and retry; the record is not
//     finished meanwhile.
//  2. Marker "done": a copy exists; finish without one.
//  3. Marker "pending": an earlier attempt may have produced (the process
//     died between the produce and "done", a produce failed on the client
//     but landed, or the holder lost the lease with its produce in flight).
//     Wait until that attempt's produce window has closed, then read the
//     dead-letter topic, every partition, from the recorded offsets to its
//     end now, for a record whose dlq-original-* headers name this record:
//     found, set "done" and finish; not found, the earlier attempt never
//     landed: go on as in 4.
//  4. Open a produce window (lua/dlq_stamp.lua, fenced by the lease: the
//     marker becomes "pending" with the window's end in Redis time and, the
//     first time, the dead-letter topic's end offsets listed before it),
//     produce the copy with a deadline inside the window, then set "done".
//
// Any copy lies at or after the recorded offsets (they were listed before the
// first produce), and a copy whose produce began inside its window has landed
// or failed when the window has closed (the window is the produce's client
// deadline, plus [dlqWindowMargin] for the broker), so the scan finds every
// copy an earlier holder wrote. A holder that lost the lease cannot open a
// window (the script is fenced) and so produces nothing more. What remains is
// the assumption every lease makes: that a produce request is not delayed in
// the network or the broker past the margin.
//
// Two workers with the same record (a rebalance, or a redelivery after a
// crash): only the lease holder reads the marker and produces; the other
// waits without finishing the record, so its offset is not committed before
// a copy exists, then finds "done".
//
// Redis unreachable: fail closed, like claims. Nothing is produced and the
// record is not finished; the worker retries with backoff (WithRedisProbe)
// until Redis answers, or until it stops, and the partition's next owner then
// handles the record. A marker or lease lost with Redis data (a restart
// without persistence) can only cost a second copy, never a lost one.
//
// Markers written before the produce window existed hold "pending:<offsets>"
// (no window: the scan starts at once) or "1" (done).
const (
	dlqMarkerDone    = "1"
	dlqMarkerPending = "pending:"

	dlqRedisTimeout   = 2 * time.Second
	dlqListTimeout    = 5 * time.Second
	dlqProduceTimeout = 10 * time.Second // a copy's produce deadline: its produce window
	dlqScanTimeout    = 10 * time.Second
	// dlqWindowMargin is how long after a produce window's end a later
	// holder still waits before it scans: the broker's time to answer a
	// request the client sent just before its deadline.
	dlqWindowMargin = time.Second

	// defaultBroker is the worker's seed broker unless WithKafka sets one.
	defaultBroker = "127.0.0.1:9092"
)

// dlqWrite is what one dead-lettering did.
type dlqWrite uint8

const (
	dlqFound     dlqWrite = iota // the copy existed already (an earlier delivery wrote it)
	dlqProduced                  // this call wrote the copy
	dlqTruncated                 // this call wrote a stand-in: the whole copy was refused as too large
)

// dlqMarkerState is what a dead-letter marker says.
type dlqMarkerState uint8

const (
	dlqAbsent  dlqMarkerState = iota // no attempt recorded (or expired)
	dlqPending                       // an attempt began; its copy may exist
	dlqDone                          // the copy exists
)

// deadLetterID names the dead-letter copy in topic of r, read from a topic
// of origin o: the marker key's suffix and the lock's lease name. The hash
// tag keeps the marker and the lock's lease key in one Cluster slot, for the
// fenced stamp script (Kafka topic names, cluster IDs and base64 URL topic
// IDs have no braces).
func deadLetterID(topic string, o recordOrigin, r *kgo.Record) string {
	return "dlq:{" + topic + ":" + o.cluster + ":" + o.topicIDString() + ":" + r.Topic + ":" +
		strconv.FormatInt(int64(r.Partition), 10) + ":" + strconv.FormatInt(r.Offset, 10) + "}"
}

// deadLetterMarkerKey is the Redis key of r's dead-letter marker.
func deadLetterMarkerKey(prefix, topic string, o recordOrigin, r *kgo.Record) string {
	return prefix + deadLetterID(topic, o, r)
}

// readDeadLetterMarker returns the marker's state and, when pending, the
// offsets recorded with it (nil if unreadable: scan from the log start) and
// how long its produce window stays open (zero when closed or absent), by
// the Redis clock (TIME in the same round trip).
func readDeadLetterMarker(ctx context.Context, rdb redis.UniversalClient, key string) (dlqMarkerState, map[int32]int64, time.Duration, error) {
	var get *redis.StringCmd
	var now *redis.TimeCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return dlqAbsent, nil, 0, err
	}
	v, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return dlqAbsent, nil, 0, nil
	case err != nil:
		return dlqAbsent, nil, 0, err
	}
	rest, pending := strings.CutPrefix(v, dlqMarkerPending)
	if !pending {
		return dlqDone, nil, 0, nil
	}
	var open time.Duration
	if closes, offs, ok := strings.Cut(rest, ";"); ok {
		rest = offs
		ms, perr := strconv.ParseInt(closes, 10, 64)
		t, terr := now.Result()
		if perr != nil || terr != nil {
			// A damaged window, or no clock: wait a whole window.
			open = dlqProduceTimeout
		} else {
			open = max(time.UnixMilli(ms).Sub(t), 0)
		}
	}
	return dlqPending, parseDLQOffsets(rest), open, nil
}

// stampDeadLetter opens a produce window of length window on the marker,
// fenced by the lock l of manager m (lua/dlq_stamp.lua), recording from as
// the offsets the scan starts at unless an earlier attempt recorded its own.
// done reports that the marker already says the copy exists. A lost lock is
// an error wrapping lease.ErrLost.
func stampDeadLetter(ctx context.Context, m *lease.Manager, l *lease.Lease, marker string, from map[int32]int64, window, retention time.Duration) (done bool, err error) {
	res, err := m.Fenced(ctx, l, lua.DLQStamp, []string{marker}, formatDLQOffsets(from),
		window.Milliseconds(), retention.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("leasehold: dead-letter marker: %w", err)
	}
	switch code, _ := res.(int64); code {
	case lua.DLQStamped:
		return false, nil
	case lua.DLQDone:
		return true, nil
	default:
		return false, fmt.Errorf("leasehold: dead-letter marker: stamp status %v", res)
	}
}

// setDeadLetterDone records that the copy exists.
func setDeadLetterDone(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) error {
	return rdb.Set(ctx, key, dlqMarkerDone, ttl).Err()
}

// formatDLQOffsets encodes offsets as "partition=offset" pairs joined by
// commas, in partition order.
func formatDLQOffsets(offs map[int32]int64) string {
	var b strings.Builder
	for i, p := range slices.Sorted(maps.Keys(offs)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(p), 10))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(offs[p], 10))
	}
	return b.String()
}

// parseDLQOffsets decodes formatDLQOffsets; it returns nil for a malformed
// value, which makes the scan start at the log start: slower, still right.
func parseDLQOffsets(s string) map[int32]int64 {
	out := make(map[int32]int64)
	if s == "" {
		return out
	}
	for pair := range strings.SplitSeq(s, ",") {
		ps, os, ok := strings.Cut(pair, "=")
		p, perr := strconv.ParseInt(ps, 10, 32)
		o, oerr := strconv.ParseInt(os, 10, 64)
		if !ok || perr != nil || oerr != nil {
			return nil
		}
		out[int32(p)] = o //nolint:gosec // ParseInt with bitSize 32 keeps p in range
	}
	return out
}

// listDLQOffsets lists topic's end offsets (the next offset to be written),
// or its log start offsets, by partition. A topic that does not exist yet
// lists no partition: nothing was written to it.
func listDLQOffsets(ctx context.Context, cl *kgo.Client, topic string, end bool) (map[int32]int64, error) {
	adm := kadm.NewClient(cl) // not closed: that would close cl
	list := adm.ListStartOffsets
	if end {
		list = adm.ListEndOffsets
	}
	listed, err := list(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("leasehold: list offsets of %s: %w", topic, err)
	}
	out := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case o.Err == nil:
			out[o.Partition] = o.Offset
		case o.Partition == -1 && errors.Is(o.Err, kerr.UnknownTopicOrPartition):
		default:
			err = cmp.Or(err, fmt.Errorf("leasehold: list offsets of %s[%d]: %w", topic, o.Partition, o.Err))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// isDeadLetterCopy reports whether r, read from a dead-letter topic, is the
// copy of orig, read from a topic of origin o. A copy without the origin
// headers (written before they existed) is matched by its coordinates.
func isDeadLetterCopy(r, orig *kgo.Record, o recordOrigin) bool {
	if c, ok := headerLookup(r.Headers, HeaderDLQCluster); ok && string(c) != o.cluster {
		return false
	}
	if id, ok := headerLookup(r.Headers, HeaderDLQTopicID); ok && string(id) != o.topicIDString() {
		return false
	}
	return string(headerValue(r.Headers, HeaderDLQTopic)) == orig.Topic &&
		string(headerValue(r.Headers, HeaderDLQPartition)) == strconv.FormatInt(int64(orig.Partition), 10) &&
		string(headerValue(r.Headers, HeaderDLQOffset)) == strconv.FormatInt(orig.Offset, 10)
}

// headerLookup returns the value of the first header named key.
func headerLookup(hs []kgo.RecordHeader, key string) ([]byte, bool) {
	for _, h := range hs {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// findDeadLetterCopy reads topic with a client of its own (connOpts plus
// direct partition consuming), every partition from the offsets in from (from
// the log start for a partition from lacks) up to the end offsets listed now
// through adm, and reports whether a copy of orig is there. It returns an
// error, and no answer, if ctx ends before every partition was read to its
// end.
func findDeadLetterCopy(ctx context.Context, adm *kgo.Client, connOpts []kgo.Opt, topic string, from map[int32]int64, orig *kgo.Record, o recordOrigin) (bool, error) {
	start, err := listDLQOffsets(ctx, adm, topic, false)
	if err != nil {
		return false, err
	}
	end, err := listDLQOffsets(ctx, adm, topic, true)
	if err != nil {
		return false, err
	}
	parts := make(map[int32]kgo.Offset)
	for p, e := range end {
		if s := max(from[p], start[p]); s < e {
			parts[p] = kgo.NewOffset().At(s)
		}
	}
	if len(parts) == 0 {
		return false, nil
	}
	opts := append(slices.Clip(connOpts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		// Control records (transaction markers) occupy offsets too: keep
		// them so that a partition whose last offsets are markers is seen
		// to reach its end.
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("leasehold: dead-letter scan client: %w", err)
	}
	defer cl.Close()
	var lastErr error
	for len(parts) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%w (last fetch error: %w)", err, lastErr)
			}
			return false, fmt.Errorf("leasehold: dead-letter scan of %s: %d partitions not read to the end: %w",
				topic, len(parts), err)
		}
		fs.EachError(func(_ string, _ int32, err error) { lastErr = err })
		found := false
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Partition]
			if !ok || r.Offset >= e {
				return
			}
			if r.Offset == e-1 {
				delete(parts, r.Partition)
			}
			if !r.Attrs.IsControl() && isDeadLetterCopy(r, orig, o) {
				found = true
			}
		})
		if found {
			return true, nil
		}
	}
	return false, nil
}

// writeDeadLetterOnce makes sure rec, the dead-letter copy of orig (read
// from a topic of origin o), exists once in the dead-letter topic (see the
// comment at the top of this file).
// wrote tells whether this call wrote it (whole or as a stand-in); ok is
// false if the worker stopped first. base carries the trace (the lock's spans join it); it is
// not cancelled when the worker stops, so a produce under way completes.
func (w *Worker) writeDeadLetterOnce(base context.Context, orig *kgo.Record, o recordOrigin, rec *kgo.Record) (wrote dlqWrite, ok bool) {
	id := deadLetterID(w.cfg.dlqTopic, o, orig)
	marker := w.cfg.keyPrefix + id
	leases := w.store.(*redisStore).m // the worker's only store
	var l *lease.Lease
	defer func() { //nolint:contextcheck // the lock is released on the worker's context, after the caller's
		if l != nil {
			w.releaseDeadLetterLock(l)
		}
	}()
	held, failed := 0, 0
	for {
		if l != nil && l.Err() != nil {
			l = nil // lost: take it again before touching the marker
		}
		var delay time.Duration
		if l == nil {
			if st, _, _, err := w.readMarker(base, marker); err == nil && st == dlqDone {
				return dlqFound, true // no lock needed to see that the copy exists
			}
			var err error
			l, err = leases.Acquire(base, id)
			var he *lease.HeldError
			switch {
			case errors.As(err, &he):
				held++
				delay = backoff(held, w.cfg.heldMin, w.cfg.heldMax)
				if he.Remaining > 0 && he.Remaining < delay {
					delay = max(he.Remaining, w.cfg.heldMin)
				}
				w.log.Debug("dead-letter lock held by another worker", slog.String("id", id), slog.Duration("retry_in", delay))
			case err != nil:
				failed++
				delay = backoff(failed, w.cfg.probeMin, w.cfg.probeMax)
				w.log.Warn("dead-letter lock not taken", slog.String("id", id), slog.Any("err", err))
			}
		}
		if l != nil {
			wrote, err := w.deadLetterLocked(l, marker, orig, o, rec) //nolint:contextcheck // runs under the lock's own context (l.Context)
			if err == nil {
				return wrote, true
			}
			failed++
			delay = backoff(failed, w.cfg.probeMin, w.cfg.probeMax)
			w.log.Warn("dead-letter attempt failed", slog.String("id", id), slog.Any("err", err))
		}
		if !sleepCtx(w.stopCtx, delay) { //nolint:contextcheck // retries wait on the worker, not on the record
			return dlqFound, false
		}
	}
}

// deadLetterLocked runs one attempt under the lock l: it reads the marker,
// waits out an earlier attempt's produce window and scans, or lists the
// offsets a scan would start at, then opens its own window and produces. A
// copy refused as too large (for the producer's limit or the topic's) is
// refused on every attempt: a small stand-in (truncatedDeadLetter) is
// produced in its place, in the same window, so that the record can be
// finished.
func (w *Worker) deadLetterLocked(l *lease.Lease, marker string, orig *kgo.Record, o recordOrigin, rec *kgo.Record) (wrote dlqWrite, err error) {
	ctx := l.Context() // cancelled if the lock is lost: an unsent copy is then not sent
	st, from, open, err := w.readMarker(ctx, marker)
	if err != nil {
		return dlqFound, err
	}
	switch st {
	case dlqDone:
		return dlqFound, nil
	case dlqPending:
		if open > 0 {
			w.log.Info("dead-letter marker pending: waiting for the earlier attempt's produce window to close",
				slog.String("marker", marker), slog.Duration("wait", open+dlqWindowMargin))
			if !sleepCtx(ctx, open+dlqWindowMargin) {
				return dlqFound, fmt.Errorf("leasehold: dead-letter: waiting for a produce window: %w", context.Cause(ctx))
			}
		}
		found, err := w.findDeadLetterCopy(ctx, from, orig, o)
		if err != nil {
			return dlqFound, err
		}
		if found {
			w.markDeadLetterDone(marker)
			return dlqFound, nil
		}
		// The earlier attempt never landed: write the copy now.
	case dlqAbsent:
		lctx, cancel := context.WithTimeout(ctx, dlqListTimeout)
		from, err = listDLQOffsets(lctx, w.cl, w.cfg.dlqTopic, true)
		cancel()
		if err != nil {
			return dlqFound, err
		}
	}
	// The produce's deadline is taken before the window opens, so it falls
	// inside the window however long the stamp's answer takes.
	pctx, cancel := context.WithTimeout(ctx, dlqProduceTimeout)
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, dlqRedisTimeout)
	done, err := stampDeadLetter(rctx, w.store.(*redisStore).m, l, marker, from, dlqProduceTimeout, w.cfg.retention)
	rcancel()
	switch {
	case err != nil:
		return dlqFound, err
	case done:
		return dlqFound, nil
	}
	wrote = dlqProduced
	err = produceDeadLetter(pctx, w.cl, rec)
	if err != nil && refusedAsTooLarge(err) {
		// Nothing landed: the whole copy can never be written. A stand-in
		// lets the partition move on.
		w.log.Warn("dead-letter copy refused as too large; writing a truncated copy",
			slog.String("marker", marker), slog.Int("value_bytes", len(rec.Value)), slog.Any("err", err))
		wrote = dlqTruncated
		if terr := produceDeadLetter(pctx, w.cl, truncatedDeadLetter(rec, err)); terr != nil {
			err = fmt.Errorf("%w; the truncated copy: %w", err, terr)
		} else {
			err = nil
		}
	}
	if err != nil {
		return dlqFound, fmt.Errorf("leasehold: dead-letter produce to %s: %w", w.cfg.dlqTopic, err)
	}
	w.markDeadLetterDone(marker)
	return wrote, nil
}

func (w *Worker) readMarker(ctx context.Context, marker string) (dlqMarkerState, map[int32]int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, dlqRedisTimeout)
	defer cancel()
	st, from, open, err := readDeadLetterMarker(ctx, w.rdb, marker)
	if err != nil {
		return st, nil, 0, fmt.Errorf("leasehold: dead-letter marker: %w", err)
	}
	return st, from, open, nil
}

// markDeadLetterDone sets the marker to "done" once a copy exists. It is
// set even if the lock was lost meanwhile: the copy exists either way. A
// failure leaves "pending": a redelivery then finds the copy by scanning.
func (w *Worker) markDeadLetterDone(marker string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.stopCtx), dlqRedisTimeout)
	defer cancel()
	if err := setDeadLetterDone(ctx, w.rdb, marker, w.cfg.retention); err != nil {
		w.log.Warn("dead-letter marker not set to done; a redelivery scans the dead-letter topic for the copy",
			slog.String("marker", marker), slog.Any("err", err))
	}
}

// findDeadLetterCopy scans the dead-letter topic for orig's copy, within
// dlqScanTimeout, and stops early when the worker stops (the scan writes
// nothing; the record is then left to the next owner).
func (w *Worker) findDeadLetterCopy(ctx context.Context, from map[int32]int64, orig *kgo.Record, o recordOrigin) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dlqScanTimeout)
	defer cancel()
	defer context.AfterFunc(w.stopCtx, cancel)() //nolint:contextcheck // the scan also ends when the worker stops
	// The worker's connection options (seed brokers, TLS, SASL) without its
	// group options, which direct partition consuming refuses.
	conn := append([]kgo.Opt{kgo.SeedBrokers(defaultBroker)}, w.cfg.kafkaOpts...)
	return findDeadLetterCopy(ctx, w.cl, conn, w.cfg.dlqTopic, from, orig, o)
}

// releaseDeadLetterLock gives the lock back, retrying while Redis cannot be
// reached (the lease is then still held and renewed, and another worker
// would wait for it) until it is released, lost at its local deadline, or
// the worker stops (Shutdown releases what the lease manager holds).
func (w *Worker) releaseDeadLetterLock(l *lease.Lease) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.stopCtx), dlqRedisTimeout)
		err := l.Release(ctx)
		cancel()
		if err == nil || l.Err() != nil {
			return
		}
		w.log.Warn("dead-letter lock not released", slog.String("lease", l.Name()), slog.Any("err", err))
		if !sleepCtx(w.stopCtx, backoff(attempt, w.cfg.probeMin, w.cfg.probeMax)) {
			return
		}
	}
}
