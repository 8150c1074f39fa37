package fleet

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config configures a [Publisher].
type Config struct {
	Redis  redis.UniversalClient // required
	Prefix string                // the worker's key prefix (e.g. "lh:")
	// Identity names the worker; ID, Host, PID and Started are filled in
	// when empty.
	Identity Identity
	// Load returns what the worker does now; called at each publish.
	// Required.
	Load func() Load
	// Interval is the publish interval. Default: 5s (a worker passes its
	// renew interval).
	Interval time.Duration
	// Log gets publish failures (at most one line a minute). Default:
	// slog.Default().
	Log *slog.Logger
}

// Publisher publishes a worker's status at its interval (see the package
// doc). Start it once; Shutdown deletes what it published.
type Publisher struct {
	c       Config
	ttl     time.Duration
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	sampled time.Time
	warned  time.Time
}

// NewPublisher checks c and returns its publisher, not started.
func NewPublisher(c Config) (*Publisher, error) {
	if c.Redis == nil || c.Load == nil {
		return nil, fmt.Errorf("%w: want a Redis client and a Load function", ErrConfig)
	}
	c.Interval = cmp.Or(c.Interval, 5*time.Second)
	c.Log = cmp.Or(c.Log, slog.Default())
	id := &c.Identity
	if id.Host == "" {
		id.Host, _ = os.Hostname()
	}
	id.PID = cmp.Or(id.PID, os.Getpid())
	if id.Started.IsZero() {
		id.Started = time.Now().UTC()
	}
	if id.ID == "" {
		// The sequence tells apart workers of one process started in the
		// same millisecond (two Workers embedded in one service, or tests).
		id.ID = id.Host + "/" + strconv.Itoa(id.PID) + "/" + strconv.FormatInt(id.Started.UnixMilli(), 36) +
			"." + strconv.FormatInt(publishers.Add(1), 36)
	}
	return &Publisher{c: c, ttl: DefaultTTLIntervals * c.Interval, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// publishers counts the process's publishers, for their IDs.
var publishers atomic.Int64

// ID returns the worker's ID in the fleet.
func (p *Publisher) ID() string { return p.c.Identity.ID }

// Start publishes once and then at every interval, until Shutdown. It
// returns the first publish's error (the worker is not seen until a later
// one succeeds); the publishing goes on regardless.
func (p *Publisher) Start(ctx context.Context) error {
	err := p.publish(ctx, time.Now())
	// Publishing lasts until Shutdown, not until ctx ends.
	go p.loop(context.WithoutCancel(ctx))
	return err
}

func (p *Publisher) loop(base context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.c.Interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			ctx, cancel := context.WithTimeout(base, p.c.Interval)
			err := p.publish(ctx, now)
			cancel()
			if err != nil && time.Since(p.warned) >= time.Minute {
				p.warned = time.Now()
				p.c.Log.Warn("fleet: publishing this worker's status failed; it may drop out of `worker fleet` until it succeeds",
					slog.Any("err", err))
			}
		}
	}
}

// publish writes the status, and a sample when the last is a minute old,
// in one pipeline.
func (p *Publisher) publish(ctx context.Context, now time.Time) error {
	ld := p.c.Load()
	st := Status{Identity: p.c.Identity, Load: ld, At: now.UTC(), IntervalMS: p.c.Interval.Milliseconds()}
	ms := now.UnixMilli()
	pipe := p.c.Redis.Pipeline()
	pipe.Set(ctx, statusKey(p.c.Prefix, st.ID), marshal(st), p.ttl)
	pipe.ZAdd(ctx, membersKey(p.c.Prefix), redis.Z{Score: float64(ms), Member: st.ID})
	pipe.ZRemRangeByScore(ctx, membersKey(p.c.Prefix), "-inf", strconv.FormatInt(ms-time.Hour.Milliseconds(), 10))
	pipe.PExpire(ctx, membersKey(p.c.Prefix), time.Hour+p.ttl)
	sample := now.Sub(p.sampled) >= SampleEvery
	if sample {
		sk := seriesKey(p.c.Prefix, st.ID)
		pipe.LPush(ctx, sk, marshal(Sample{At: st.At, Load: ld}))
		pipe.LTrim(ctx, sk, 0, MaxSamples-1)
		pipe.PExpire(ctx, sk, time.Hour+p.ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("fleet: publish: %w", err)
	}
	if sample {
		p.sampled = now
	}
	return nil
}

// Shutdown stops publishing and deletes the worker's status (its series
// stays for the hour: the plot keeps what the worker did). Idempotent.
func (p *Publisher) Shutdown(ctx context.Context) error {
	p.once.Do(func() { close(p.stop) })
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The member stays in fleet:workers (pruned after the hour), so that
	// the fleet's series still counts what this worker did.
	if err := p.c.Redis.Del(ctx, statusKey(p.c.Prefix, p.ID())).Err(); err != nil {
		return fmt.Errorf("fleet: delete this worker's status: %w", err)
	}
	return nil
}

func membersKey(prefix string) string    { return prefix + "fleet:workers" }
func statusKey(prefix, id string) string { return prefix + "fleet:w:" + id }
func seriesKey(prefix, id string) string { return prefix + "fleet:s:" + id }
