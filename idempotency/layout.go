package idempotency

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// A layout is how records are cut into buckets: the window length, the
// retention and the shard count. Bucket names carry the window's start, so a
// Store started with another retention or window count mostly writes into
// other buckets than the one before it; where the two layouts' windows start
// at the same instants (24h in 2 windows and 12h in 1; 24h and 12h in 2,
// every other window) they share a bucket, and the scripts only ever raise a
// bucket's expiry while another layout is live, so that each record lives for
// the retention it was written with (some longer). A completed record whose
// result key, written with the shorter retention, is gone is read as expired
// (expiredExternal). Each
// Store announces its layout in one hash,
//
//	<prefix>idem:layouts   field = "<window ms>/<retention ms>/<shards>", value = last announcement (Redis ms)
//
// (the hash expires with the longest-lived layout in it), and reads there
// which other layouts still have live records: a claim also
// looks in their live buckets (in the same Cluster slot, since the shard
// count is the same), so a key completed under any retention is replayed for
// as long as its record lives. A layout is live until its last announcement
// plus one window plus its retention: no record written under it outlives
// that. Another shard count cannot be consulted (its keys carry other hash
// tags), so New refuses it while records of the earlier one live.

// layoutRefresh is how often a Store re-reads the other layouts and
// announces its own, at most: a claim or a finish sent later than this after
// the last read reads them again first.
const layoutRefresh = time.Second

type layout struct {
	window    time.Duration
	retention time.Duration
	shards    int
}

// liveLayout is another layout whose records may still be read.
type liveLayout struct {
	layout
	seen time.Time // last announced (Redis time)
}

func (l layout) field() string {
	return strconv.FormatInt(l.window.Milliseconds(), 10) + "/" + strconv.FormatInt(l.retention.Milliseconds(), 10) +
		"/" + strconv.Itoa(l.shards)
}

func parseLayout(f string) (layout, bool) {
	parts := strings.Split(f, "/")
	if len(parts) != 3 {
		return layout{}, false
	}
	w, err1 := strconv.ParseInt(parts[0], 10, 64)
	r, err2 := strconv.ParseInt(parts[1], 10, 64)
	n, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || w <= 0 || r <= 0 || n <= 0 {
		return layout{}, false
	}
	return layout{window: time.Duration(w) * time.Millisecond, retention: time.Duration(r) * time.Millisecond, shards: n}, true
}

// until is when the last record written under l, by a Store that announced
// it at seen, has expired: a Store announces before every claim sent more
// than layoutRefresh after its last announcement, and before a finish sent
// more than one window after it (see announceOld), and a record lives at
// most one window plus the retention.
func (l layout) until(seen time.Time) time.Time {
	return seen.Add(layoutRefresh + 2*l.window + l.retention)
}

func (s *Store) own() layout {
	return layout{window: s.window, retention: s.cfg.retention, shards: s.cfg.shards}
}

func (s *Store) layoutsKey() string { return s.cfg.prefix + "idem:layouts" }

// LayoutError reports a Store started with a shard count other than the one
// records still live under. It matches ErrLayoutChanged.
type LayoutError struct {
	Shards int       // the shard count of the live records
	Until  time.Time // when the last of them expires (Redis time)
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("idempotency: records written with %d shards live until %s and a claim cannot reach them "+
		"under another shard count; start with WithShards(%d) until then, or delete that layout's entry from the "+
		"idem:layouts hash to accept that those keys may run again",
		e.Shards, e.Until.UTC().Format(time.RFC3339), e.Shards)
}

// Unwrap returns ErrLayoutChanged.
func (e *LayoutError) Unwrap() error { return ErrLayoutChanged }

// startLayouts is New's read of the layouts: it takes the live records'
// shard count when adopt (no WithShards) and refuses a live layout of
// another shard count.
func (s *Store) startLayouts(ctx context.Context, adopt bool) error {
	s.layoutMu.Lock()
	defer s.layoutMu.Unlock()
	sent := time.Now()
	all, err := s.readLayouts(ctx)
	if err != nil {
		return err
	}
	if adopt {
		s.adoptShards(all)
	}
	return s.useLayouts(ctx, all, sent, true, false)
}

// readLayouts reads the announced layouts: field = layout, value = last
// announcement (Redis ms).
func (s *Store) readLayouts(ctx context.Context) (map[string]string, error) {
	all, err := s.c.HGetAll(ctx, s.layoutsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("idempotency: read layouts: %w", classify(err))
	}
	return all, nil
}

// adoptShards, for a Store started without WithShards, takes the shard count
// of the records that live under its prefix (all, as readLayouts read them)
// when they all share one other than the default: a deployment started
// before the default changed keeps its layout instead of being refused.
// Several live shard counts leave the default, which useLayouts then refuses
// by name.
func (s *Store) adoptShards(all map[string]string) {
	now := s.redisNow()
	found := 0
	for f, v := range all {
		ms, perr := strconv.ParseInt(v, 10, 64)
		l, ok := parseLayout(f)
		if perr != nil || !ok || !now.Before(l.until(time.UnixMilli(ms))) {
			continue // unreadable (refreshLayouts warns) or dead
		}
		if found != 0 && l.shards != found {
			return
		}
		found = l.shards
	}
	if found != 0 && found != s.cfg.shards {
		s.log.Info("idempotency: keeping the shard count of the live records (WithShards sets another)",
			slog.Int("shards", found), slog.Int("default", s.cfg.shards))
		s.cfg.shards = found
	}
}

// otherLayouts returns the other live layouts whose buckets a claim reads,
// read again when the last read is older than layoutRefresh. announce (a
// claim that is about to write) also announces the Store's own layout then.
func (s *Store) otherLayouts(ctx context.Context, announce bool) ([]liveLayout, error) {
	s.layoutMu.Lock()
	defer s.layoutMu.Unlock()
	stale := s.layoutAt.IsZero() || time.Since(s.layoutAt) >= layoutRefresh
	if announce {
		stale = stale || s.announced.IsZero() || time.Since(s.announced) >= layoutRefresh
	}
	if stale {
		if err := s.refreshLayouts(ctx, false, announce); err != nil {
			return nil, err
		}
	}
	return s.layouts, nil
}

// announceOld announces the Store's layout before a finish when its last
// announcement is more than one window old (a long job, no claim since), so
// that Stores of other layouts keep reading the bucket it writes. A failure
// to reach Redis shows in the finishing write itself.
func (s *Store) announceOld(ctx context.Context) {
	s.layoutMu.Lock()
	defer s.layoutMu.Unlock()
	if !s.announced.IsZero() && time.Since(s.announced) < s.window {
		return
	}
	_ = s.refreshLayouts(ctx, false, true)
}

// refreshLayouts reads the announced layouts and uses them (useLayouts).
func (s *Store) refreshLayouts(ctx context.Context, strict, announce bool) error {
	sent := time.Now()
	all, err := s.readLayouts(ctx)
	if err != nil {
		return err
	}
	return s.useLayouts(ctx, all, sent, strict, announce)
}

// layoutsRead is what sortLayouts found in the layouts hash.
type layoutsRead struct {
	live       []liveLayout // other live layouts of the Store's shard count
	dead       []string     // fields of layouts whose records have all expired
	introduced bool         // the Store's own layout is not among the live ones
	latest     time.Time    // the newest announcement of another live layout
}

// sortLayouts sorts the announced layouts all, at Redis time now, against
// the Store's own layout; strict refuses a live layout of another shard
// count, which is otherwise logged and left out.
func (s *Store) sortLayouts(all map[string]string, now time.Time, own layout, strict bool) (layoutsRead, error) {
	r := layoutsRead{introduced: true}
	for f, v := range all {
		ms, perr := strconv.ParseInt(v, 10, 64)
		l, ok := parseLayout(f)
		if perr != nil || !ok {
			s.log.Warn("idempotency: ignoring an unreadable layout entry", slog.String("field", f), slog.String("value", v))
			continue
		}
		seen := time.UnixMilli(ms)
		switch {
		case !now.Before(l.until(seen)):
			r.dead = append(r.dead, f)
			continue
		case f == own.field():
			r.introduced = false
			continue
		case l.shards != own.shards:
			lerr := &LayoutError{Shards: l.shards, Until: l.until(seen)}
			if strict {
				return r, lerr
			}
			s.log.Error("idempotency: records of another shard count cannot be consulted", slog.String("error", lerr.Error()))
			continue
		}
		r.live = append(r.live, liveLayout{layout: l, seen: seen})
		if seen.After(r.latest) {
			r.latest = seen
		}
	}
	return r, nil
}

// useLayouts keeps the live layouts of all, read at sent (local time).
// strict (at New) refuses a live layout with another shard count. announce
// also prunes the dead ones and announces the Store's own. When the Store's
// layout is new to the others (absent, or announced so long ago that its
// records expired), it then waits until every Store that announced another
// layout has read the layouts again, so that none of them claims without
// looking at the records this Store is about to write.
func (s *Store) useLayouts(ctx context.Context, all map[string]string, sent time.Time, strict, announce bool) error {
	now := s.redisNow()
	own := s.own()
	r, err := s.sortLayouts(all, now, own, strict)
	if err != nil {
		return err
	}
	s.layouts, s.layoutAt = r.live, sent
	if !announce {
		return nil
	}
	// The hash lives as long as the longest-lived layout in it, so that a
	// prefix no Store uses any more leaves nothing behind.
	expires := own.until(now)
	for _, l := range r.live {
		if u := l.until(l.seen); u.After(expires) {
			expires = u
		}
	}
	p := s.c.Pipeline()
	p.HSet(ctx, s.layoutsKey(), own.field(), strconv.FormatInt(now.UnixMilli(), 10))
	if len(r.dead) > 0 {
		p.HDel(ctx, s.layoutsKey(), r.dead...)
	}
	p.PExpireAt(ctx, s.layoutsKey(), expires)
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("idempotency: announce layout: %w", classify(err))
	}
	s.announced = sent
	if r.introduced && !r.latest.IsZero() {
		// Others read the layouts again at most layoutRefresh after they
		// announced (before their next claim); one more for the claim
		// in flight and the clock estimate.
		if wait := r.latest.Add(2 * layoutRefresh).Sub(now); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("idempotency: waiting for the Stores of other layouts: %w", ctx.Err())
			}
		}
	}
	return nil
}

// otherWindows returns the (window length, window index) pairs of the other
// layouts' buckets in which records may still live, newest first: the same
// for every tag, so that every entry of a claim call passes as many.
func (s *Store) otherWindows(others []liveLayout) [][2]int64 {
	if len(others) == 0 {
		return nil
	}
	now := s.redisNow()
	const margin = time.Second
	var out [][2]int64
	for _, l := range others {
		w := l.window.Milliseconds()
		// A bucket expires at its window's end plus the retention. Its
		// Store may still be writing (it announces again before it writes,
		// after this view was read): up to the current window.
		last := now.Add(margin).UnixMilli() / w
		first := now.Add(-l.retention-margin).UnixMilli()/w - 1
		for i := last; i >= first; i-- {
			out = append(out, [2]int64{w, i})
		}
	}
	return out
}

// otherBucketKey names the bucket of tag for window index i of length w ms
// (bucketKey for another layout).
func (s *Store) otherBucketKey(tag string, w, i int64) string {
	return s.cfg.prefix + "idem:b:" + tag + ":" + strconv.FormatInt(i*w, 10)
}
