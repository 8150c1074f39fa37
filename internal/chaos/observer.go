package chaos

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/lease"
)

// Observer watches the lease keys in Redis from the outside and derives two
// figures that no worker reports about itself:
//
//   - takeovers: a lease key seen with one owner token and later with
//     another, without having been renewed in between by the first owner
//     (a released lease is deleted and a completed job is not claimed
//     again, so a new token means the key was taken over);
//   - takeover latency: for each SIGKILL ([Observer.MarkKill]), the delay
//     from the kill to each takeover of a lease that was live at the kill
//     and never renewed after it (so it belonged to the dead worker).
//
// A SIGSTOPped worker's leases also stop being renewed ([Observer.MarkPause]
// tells the Observer of pauses). The Observer sees keys, not owners, so it
// keeps them apart by renewal time: while a pause lasts, a kill does not
// count the leases left unrenewed for longer than a renew interval (the
// paused worker's), and a kill within a renew interval of a pause, before or
// after it, is not measured at all (both workers' leases were last renewed
// before either fault, so nothing tells them apart; [Observer.Unmeasured]
// counts those kills).
//
// It reads only the owner token of each lease key (lease.Peek) and its PTTL, per the
// lease key layout `<prefix>lease:...`.
type Observer struct {
	client  redis.UniversalClient
	pattern string
	every   time.Duration
	renew   time.Duration // the workers' renew interval, plus the polling slack

	mu          sync.Mutex
	keys        map[string]*leaseSeen
	lastPoll    time.Time // Redis server time of the last snapshot
	kills       []*killMark
	lastPause   time.Time // local time the last pause began
	pausedUntil time.Time // local time the last pause ends
	takeovers   int
	measured    []Takeover
	unmeasured  int
}

// Takeover is one measured takeover of a killed worker's lease.
type Takeover struct {
	Key      string
	KilledAt time.Time     // local time of the kill
	Latency  time.Duration // from the kill to the sighting of the new owner
}

type leaseSeen struct {
	tok       string
	pttl      time.Duration
	seenAt    time.Time // Redis server time of the sighting
	renewedAt time.Time // Redis server time of the first sighting of this PTTL run: the last renewal, give or take a poll
}

type killMark struct {
	at      time.Time
	until   time.Time
	pending map[string]string // key -> token at the kill, not yet renewed or taken over
}

// NewObserver returns an Observer of the keys matching prefix+"lease:*",
// polling every interval (default 25ms), for workers that renew their leases
// every renew.
func NewObserver(client redis.UniversalClient, prefix string, every, renew time.Duration) *Observer {
	if every <= 0 {
		every = 25 * time.Millisecond
	}
	// A renewal is seen up to a poll late, and a renew round of many leases
	// takes a few milliseconds more.
	renew += 2*every + 20*time.Millisecond
	return &Observer{client: client, pattern: prefix + "lease:*", every: every, renew: renew, keys: map[string]*leaseSeen{}}
}

// Run polls until ctx ends. Polls that fail (Redis down) are skipped.
func (o *Observer) Run(ctx context.Context) {
	t := time.NewTicker(o.every)
	defer t.Stop()
	for {
		_ = o.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// MarkKill records that a worker was killed now; the leases that are live
// now and are never renewed again are attributed to it, except around a
// pause (see [Observer]). The mark is dropped after watch (the longest a
// takeover may take to count).
func (o *Observer) MarkKill(watch time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if now.Sub(o.lastPause) < o.renew {
		o.unmeasured++
		return
	}
	paused := now.Before(o.pausedUntil)
	m := &killMark{at: now, until: now.Add(watch), pending: map[string]string{}}
	for k, s := range o.keys {
		if s.tok == "" || paused && o.lastPoll.Sub(s.renewedAt) > o.renew {
			continue
		}
		m.pending[k] = s.tok
	}
	o.kills = append(o.kills, m)
}

// MarkPause records that a worker was stopped now for d. Kills less than a
// renew interval ago are no longer measured (see [Observer]).
func (o *Observer) MarkPause(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	o.lastPause = now
	if end := now.Add(d); end.After(o.pausedUntil) {
		o.pausedUntil = end
	}
	live := o.kills[:0]
	for _, m := range o.kills {
		if now.Sub(m.at) < o.renew {
			o.unmeasured++
			continue
		}
		live = append(live, m)
	}
	o.kills = live
}

// Poll takes one snapshot of the lease keys and updates the figures.
func (o *Observer) Poll(ctx context.Context) error {
	var keys []string
	iter := o.client.Scan(ctx, 0, o.pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	// The PTTLs are compared with the Redis server's own clock (TIME in
	// the same pipeline), not with the time this process got the reply:
	// under load the reply can come tens of milliseconds late, which
	// would read as a renewal or make an expired lease look released.
	var serverTime *redis.TimeCmd
	reads := make([]*lease.PeekCmd, len(keys))
	_, err := o.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		serverTime = p.Time(ctx)
		for i, k := range keys {
			reads[i] = lease.Peek(ctx, p, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		// A key may vanish between SCAN and the read (redis.Nil); any
		// other error means the snapshot is unusable.
		for _, c := range reads {
			if err := c.Err(); err != nil {
				return err
			}
		}
	}
	at, err := serverTime.Result()
	if err != nil {
		return err
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	present := make(map[string]bool, len(keys))
	for i, k := range keys {
		present[k] = true
		h, ok := reads[i].Holder()
		if !ok || h.Remaining <= 0 {
			continue
		}
		o.observe(k, h.Token, h.Remaining, at, now)
	}
	o.lastPoll = at
	o.forgetReleased(present, at)
	o.expireKillMarks(now)
	return nil
}

// observe folds one (key, token, pttl) sighting, made at Redis server time
// at and received at local time now, into the state.
func (o *Observer) observe(key, tok string, pttl time.Duration, at, now time.Time) {
	prev, ok := o.keys[key]
	if !ok {
		o.keys[key] = &leaseSeen{tok: tok, pttl: pttl, seenAt: at, renewedAt: at}
		return
	}
	// A renewal resets the PTTL to the full TTL: the remaining time grows
	// compared with the expected countdown, by more than the spread of
	// one pipeline's execution and the millisecond rounding of PTTL.
	elapsed := at.Sub(prev.seenAt)
	renewed := tok == prev.tok && pttl > prev.pttl-elapsed+renewSlack
	if tok != prev.tok {
		o.takeovers++
	}
	for _, m := range o.kills {
		old, watched := m.pending[key]
		if !watched {
			continue
		}
		switch {
		case tok != old:
			o.measured = append(o.measured, Takeover{Key: key, KilledAt: m.at, Latency: now.Sub(m.at)})
			delete(m.pending, key)
		case renewed:
			// A live worker renewed it: not the dead worker's lease.
			delete(m.pending, key)
		}
	}
	if renewed || tok != prev.tok {
		prev.renewedAt = at
	}
	prev.tok, prev.pttl, prev.seenAt = tok, pttl, at
}

// renewSlack is how far a PTTL may exceed its expected countdown without
// counting as a renewal. A renewal moves the PTTL up by the time since the
// previous one (the renew interval, hundreds of milliseconds), so a
// generous slack loses none of them.
const renewSlack = 20 * time.Millisecond

// forgetReleased drops the keys that vanished well before their PTTL ran
// out (at is the Redis server time of the snapshot): their owner released
// them (job done or failed for retry), so a later lease on the same key is a
// new claim, not a takeover.
func (o *Observer) forgetReleased(present map[string]bool, at time.Time) {
	for k, s := range o.keys {
		if present[k] {
			continue
		}
		if at.Add(2 * o.every).Before(s.seenAt.Add(s.pttl)) {
			delete(o.keys, k)
			for _, m := range o.kills {
				delete(m.pending, k)
			}
		}
	}
}

func (o *Observer) expireKillMarks(now time.Time) {
	live := o.kills[:0]
	for _, m := range o.kills {
		if now.Before(m.until) && len(m.pending) > 0 {
			live = append(live, m)
		}
	}
	o.kills = live
	// Forget keys not seen for a long time so that memory stays bounded
	// over long runs; a takeover takes at most a few TTLs.
	for k, s := range o.keys {
		if now.Sub(s.seenAt) > 10*time.Minute {
			delete(o.keys, k)
		}
	}
}

// Takeovers returns the number of owner changes seen so far.
func (o *Observer) Takeovers() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.takeovers
}

// Latencies returns the kill-to-takeover delays measured so far.
func (o *Observer) Latencies() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]time.Duration, len(o.measured))
	for i, m := range o.measured {
		out[i] = m.Latency
	}
	return out
}

// Unmeasured returns the number of kills not measured because they came
// within a renew interval of a pause.
func (o *Observer) Unmeasured() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unmeasured
}

// Slowest returns the n slowest takeovers measured so far, slowest first:
// the keys and kill times to look up in the workers' logs.
func (o *Observer) Slowest(n int) []Takeover {
	o.mu.Lock()
	out := slices.Clone(o.measured)
	o.mu.Unlock()
	slices.SortFunc(out, func(a, b Takeover) int { return cmp.Compare(b.Latency, a.Latency) })
	return out[:min(n, len(out))]
}
