package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/retry"
	"github.com/leasehold/leasehold/lease"
)

const (
	redisTimeout = 2 * time.Second
	listTimeout  = 5 * time.Second
	scanTimeout  = 10 * time.Second
	// produceWindow is a copy's produce deadline, and so the length of the
	// produce window its attempt opens on the marker.
	produceWindow = 10 * time.Second
	// windowMargin is how long after a produce window's end a later holder
	// still waits before it scans: the broker's time to answer a request the
	// client sent just before its deadline.
	windowMargin = time.Second
)

// Locks takes the per-record locks that serialize writers and runs the
// fenced stamp script under one. *lease.Manager has both methods; the lease
// TTL bounds how long a dead holder keeps a record's writers waiting.
type Locks interface {
	// Acquire takes the lock name; another holder is a *lease.HeldError.
	Acquire(ctx context.Context, name string) (*lease.Lease, error)
	// Fenced runs a scripts.Fenced script only while l is held.
	Fenced(ctx context.Context, l *lease.Lease, s *redis.Script, keys []string, args ...any) (any, error)
}

// Config holds a [Writer]'s dependencies and settings. Client, Redis, Locks
// and Topic are required.
type Config struct {
	// Topic is the dead-letter topic.
	Topic string
	// Client produces the copies and lists offsets and topic metadata. Its
	// producer's batch limit bounds the copies it can write whole.
	Client *kgo.Client
	// ConnOpts connect a reader client of the Writer's own (seed brokers,
	// TLS, SASL; no group options), which reads the dead-letter topic for a
	// copy an earlier attempt may have written. Default: none, franz-go's
	// default seed broker (127.0.0.1:9092).
	ConnOpts []kgo.Opt
	// Redis holds the markers.
	Redis redis.UniversalClient
	// Locks takes the per-record locks (the worker's lease manager).
	Locks Locks
	// Origins caches the consumed topics' cluster and topic IDs; the
	// consumer forgets a topic's entry when its partitions are assigned.
	// Default: a cache of the Writer's own, never forgotten.
	Origins *Origins
	// KeyPrefix begins every marker key. Default "lh:".
	KeyPrefix string
	// Retention is how long a marker is kept: a record redelivered within it
	// is not written again. Default 24h.
	Retention time.Duration
	// Logger logs retries and stand-in copies. Default slog.Default().
	Logger *slog.Logger
	// HeldMin and HeldMax bound the wait, with backoff, while another writer
	// holds a record's lock. Defaults 100ms and 2s.
	HeldMin, HeldMax time.Duration
	// RetryMin and RetryMax bound the wait, with backoff, after a failed
	// attempt (Redis or Kafka not answering). Defaults 100ms and 2s.
	RetryMin, RetryMax time.Duration
}

// Writer writes the dead-letter copy of a record exactly once (see the
// package documentation). It is safe for concurrent use.
type Writer struct {
	cfg Config
	log *slog.Logger
}

// New returns a Writer over cfg's dependencies, with cfg's defaults applied.
// It fails with [ErrConfig] when a required field is missing.
func New(cfg Config) (*Writer, error) {
	switch {
	case cfg.Topic == "":
		return nil, fmt.Errorf("%w: no topic", ErrConfig)
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: no Kafka client", ErrConfig)
	case cfg.Redis == nil:
		return nil, fmt.Errorf("%w: no Redis client", ErrConfig)
	case cfg.Locks == nil:
		return nil, fmt.Errorf("%w: no locks", ErrConfig)
	}
	if cfg.Origins == nil {
		cfg.Origins = new(Origins)
	}
	cfg.KeyPrefix = cmp.Or(cfg.KeyPrefix, "lh:")
	cfg.Retention = cmp.Or(cfg.Retention, 24*time.Hour)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.HeldMin = cmp.Or(cfg.HeldMin, 100*time.Millisecond)
	cfg.HeldMax = cmp.Or(cfg.HeldMax, 2*time.Second)
	cfg.RetryMin = cmp.Or(cfg.RetryMin, 100*time.Millisecond)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, 2*time.Second)
	return &Writer{cfg: cfg, log: cfg.Logger}, nil
}

// Result is what one [Writer.Write] did.
type Result uint8

const (
	// Written means this call wrote the copy.
	Written Result = iota + 1
	// WrittenTruncated means this call wrote a stand-in (HeaderTruncated),
	// the whole copy being refused as too large.
	WrittenTruncated
	// AlreadyWritten means the copy existed already (an earlier attempt
	// wrote it); nothing was written.
	AlreadyWritten
)

// String names r for logs.
func (r Result) String() string {
	switch r {
	case Written:
		return "written"
	case WrittenTruncated:
		return "written-truncated"
	case AlreadyWritten:
		return "already-written"
	}
	return "unknown"
}

// job is one record's dead-lettering.
type job struct {
	id     string // the lock's name; the marker key's suffix
	marker string // the marker key
	orig   *kgo.Record
	origin origin
	rec    *kgo.Record // the copy
}

// Write makes sure the dead-letter copy of orig (read from a consumed topic,
// with its topic, partition and offset), naming reason and cause, exists
// once in the dead-letter topic, and says whether this call wrote it. It
// retries, with backoff, until the copy exists or ctx ends; it then returns
// an error wrapping ctx's cause, and the copy may or may not exist (a later
// Write finds it). ctx's values (the trace) reach the lock's and the
// produce's spans; ctx ending does not cancel a produce under way.
func (w *Writer) Write(ctx context.Context, orig *kgo.Record, reason string, cause error) (Result, error) {
	o, err := w.origin(ctx, orig.Topic)
	if err != nil {
		return 0, err
	}
	j := &job{id: copyID(w.cfg.Topic, o, orig), orig: orig, origin: o,
		rec: withOrigin(newRecord(w.cfg.Topic, orig, reason, cause), o)}
	j.marker = w.cfg.KeyPrefix + j.id
	return w.writeOnce(ctx, j)
}

// origin returns the origin of topic's records, retrying with backoff while
// the brokers do not answer, until ctx ends.
func (w *Writer) origin(ctx context.Context, topic string) (origin, error) {
	for attempt := 1; ; attempt++ {
		mctx, cancel := context.WithTimeout(ctx, listTimeout)
		o, err := w.cfg.Origins.get(mctx, w.cfg.Client, topic)
		cancel()
		if err == nil {
			return o, nil
		}
		w.log.Warn("dead-letter: topic metadata not read", slog.String("topic", topic), slog.Any("err", err))
		if !retry.Sleep(ctx, retry.Delay(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return origin{}, fmt.Errorf("deadletter: origin of %s: %w", topic, context.Cause(ctx))
		}
	}
}

// writeOnce takes j's lock (waiting while another writer holds it) and runs
// attempts under it until one ends with the copy in place.
func (w *Writer) writeOnce(ctx context.Context, j *job) (Result, error) {
	base := context.WithoutCancel(ctx) // the lock, and a produce under way, outlive ctx
	var l *lease.Lease
	defer func() {
		if l != nil {
			w.release(ctx, l)
		}
	}()
	held, failed := 0, 0
	for {
		if l != nil && l.Err() != nil {
			l = nil // lost: take it again before touching the marker
		}
		var delay time.Duration
		if l == nil {
			if m, err := w.readMarker(base, j.marker); err == nil && m.state == done {
				return AlreadyWritten, nil // no lock needed to see that the copy exists
			}
			var err error
			l, err = w.cfg.Locks.Acquire(base, j.id)
			var he *lease.HeldError
			switch {
			case errors.As(err, &he):
				held++
				delay = retry.Delay(held, w.cfg.HeldMin, w.cfg.HeldMax)
				if he.Remaining > 0 && he.Remaining < delay {
					delay = max(he.Remaining, w.cfg.HeldMin)
				}
				w.log.Debug("dead-letter lock held by another worker", slog.String("id", j.id), slog.Duration("retry_in", delay))
			case err != nil:
				failed++
				delay = retry.Delay(failed, w.cfg.RetryMin, w.cfg.RetryMax)
				w.log.Warn("dead-letter lock not taken", slog.String("id", j.id), slog.Any("err", err))
			}
		}
		if l != nil {
			res, err := w.attempt(l.Context(), ctx, l, j) //nolint:contextcheck // under the lock's own context: a produce under way outlives ctx
			if err == nil {
				return res, nil
			}
			failed++
			delay = retry.Delay(failed, w.cfg.RetryMin, w.cfg.RetryMax)
			w.log.Warn("dead-letter attempt failed", slog.String("id", j.id), slog.Any("err", err))
		}
		if !retry.Sleep(ctx, delay) {
			return 0, fmt.Errorf("deadletter: copy %s not written: %w", j.id, context.Cause(ctx))
		}
	}
}

// attempt runs one attempt under the lock l, whose context lctx is
// cancelled when the lock is lost (an unsent copy is then not sent): it
// reads the marker, waits out an earlier attempt's produce window and scans
// for its copy, or lists the offsets a later scan would start at, then opens
// its own window and produces. Waiting and scanning also end when stop ends
// (they write nothing); the produce does not.
func (w *Writer) attempt(lctx, stop context.Context, l *lease.Lease, j *job) (Result, error) {
	m, err := w.readMarker(lctx, j.marker)
	if err != nil {
		return 0, err
	}
	switch m.state {
	case done:
		return AlreadyWritten, nil
	case pending:
		found, err := w.findEarlierCopy(lctx, stop, j, m)
		if err != nil {
			return 0, err
		}
		if found {
			w.markDone(lctx, j.marker)
			return AlreadyWritten, nil
		}
		// The earlier attempt never landed: write the copy now.
	case absent:
		ectx, cancel := context.WithTimeout(lctx, listTimeout)
		m.from, err = EndOffsets(ectx, w.cfg.Client, w.cfg.Topic)
		cancel()
		if err != nil {
			return 0, err
		}
	}
	return w.produce(lctx, l, j, m.from)
}

// findEarlierCopy waits until the produce window of the pending marker m
// has closed, then scans the dead-letter topic from the offsets m recorded
// for j's copy, within scanTimeout; both end early when lctx (the lock's)
// or stop ends.
func (w *Writer) findEarlierCopy(lctx, stop context.Context, j *job, m marker) (bool, error) {
	sctx, cancel := context.WithCancelCause(lctx)
	defer cancel(nil)
	defer context.AfterFunc(stop, func() { cancel(context.Cause(stop)) })()
	if m.open > 0 {
		w.log.Info("dead-letter marker pending: waiting for the earlier attempt's produce window to close",
			slog.String("marker", j.marker), slog.Duration("wait", m.open+windowMargin))
		if !retry.Sleep(sctx, m.open+windowMargin) {
			return false, fmt.Errorf("deadletter: waiting for a produce window: %w", context.Cause(sctx))
		}
	}
	sctx, cancelScan := context.WithTimeout(sctx, scanTimeout)
	defer cancelScan()
	ectx, cancelEnd := context.WithTimeout(sctx, listTimeout)
	end, err := EndOffsets(ectx, w.cfg.Client, w.cfg.Topic)
	cancelEnd()
	if err != nil {
		return false, err
	}
	found := false
	err = Scan(sctx, w.cfg.Client, w.cfg.ConnOpts, w.cfg.Topic, m.from, end, func(r *kgo.Record) bool {
		found = isCopy(r, j.orig, j.origin)
		return !found
	})
	if found {
		return true, nil
	}
	return false, err
}

// produce opens a produce window on j's marker under the lock l, recording
// from, and produces j's copy within it, or, when the topic refuses the
// copy as too large (for the producer's limit or the topic's, refused on
// every attempt), a small stand-in in the same window, so that the record
// can be finished. It then marks the copy done.
func (w *Writer) produce(lctx context.Context, l *lease.Lease, j *job, from map[int32]int64) (Result, error) {
	// The produce's deadline is taken before the window opens, so it falls
	// inside the window however long the stamp's answer takes.
	pctx, cancel := context.WithTimeout(lctx, produceWindow)
	defer cancel()
	rctx, rcancel := context.WithTimeout(lctx, redisTimeout)
	isDone, err := stamp(rctx, w.cfg.Locks, l, j.marker, from, produceWindow, w.cfg.Retention)
	rcancel()
	switch {
	case err != nil:
		return 0, err
	case isDone:
		return AlreadyWritten, nil
	}
	res := Written
	err = w.cfg.Client.ProduceSync(pctx, j.rec).FirstErr()
	if err != nil && refusedAsTooLarge(err) {
		// Nothing landed: the whole copy can never be written. A stand-in
		// lets the partition move on.
		w.log.Warn("dead-letter copy refused as too large; writing a truncated copy",
			slog.String("marker", j.marker), slog.Int("value_bytes", len(j.rec.Value)), slog.Any("err", err))
		res = WrittenTruncated
		if terr := w.cfg.Client.ProduceSync(pctx, truncated(j.rec, err)).FirstErr(); terr != nil {
			err = fmt.Errorf("%w; the truncated copy: %w", err, terr)
		} else {
			err = nil
		}
	}
	if err != nil {
		return 0, fmt.Errorf("deadletter: produce to %s: %w", w.cfg.Topic, err)
	}
	w.markDone(lctx, j.marker)
	return res, nil
}

// readMarker reads the marker at key within redisTimeout.
func (w *Writer) readMarker(ctx context.Context, key string) (marker, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return readMarker(ctx, w.cfg.Redis, key)
}

// markDone sets the marker at key to done once a copy exists. It is set
// even if the lock was lost meanwhile (ctx is not heeded for cancellation):
// the copy exists either way. A failure leaves the marker pending: a later
// Write then finds the copy by scanning.
func (w *Writer) markDone(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	if err := w.cfg.Redis.Set(ctx, key, markerDone, w.cfg.Retention).Err(); err != nil {
		w.log.Warn("dead-letter marker not set to done; a redelivery scans the dead-letter topic for the copy",
			slog.String("marker", key), slog.Any("err", err))
	}
}

// release gives the lock back, retrying while Redis cannot be reached (the
// lease is then still held and renewed, and another writer would wait for
// it) until it is released, lost at its local deadline, or ctx ends (the
// lease manager's shutdown then releases what it holds).
func (w *Writer) release(ctx context.Context, l *lease.Lease) {
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
		err := l.Release(rctx)
		cancel()
		if err == nil || l.Err() != nil {
			return
		}
		w.log.Warn("dead-letter lock not released", slog.String("lease", l.Name()), slog.Any("err", err))
		if !retry.Sleep(ctx, retry.Delay(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return
		}
	}
}
