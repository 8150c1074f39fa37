package compensation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
)

// State of a journal.
type State string

// Journal states.
const (
	StateOpen         State = "open"      // steps may still be added
	StateSealed       State = "sealed"    // the job is committing
	StateCommitted    State = "committed" // the commit landed; never compensated
	StateCompensating State = "comp"      // compensation began
	StateCompensated  State = "done"      // every step compensated
	StateDeadLettered State = "dead"      // a step's compensation failed on every attempt
)

// StepRecord is one journaled step, as stored.
type StepRecord struct {
	Step       int
	Name       string
	Handler    string
	State      string // intent, done, claimed, retry, comp (compensated), dead
	Done       bool   // the effect was confirmed; false means in doubt
	Attempts   int
	Generation int
	ArgsBytes  int    // size of the encoded arguments (not shown: they may be sensitive)
	Error      string // the last failed attempt's error
}

// JournalInfo is a journal as stored.
type JournalInfo struct {
	Ref     Ref
	State   State
	Created time.Time
	Steps   []StepRecord
}

// DeadLetter is a dead-lettered journal: [Runner.List] returns them.
type DeadLetter struct {
	JournalInfo
	Since time.Time
}

// stepFields are the stored fields of a step that Inspect reads (never the
// arguments themselves, which may be large or sensitive).
var stepFields = []string{"name", "h", "st", "ok", "t", "g", "e"}

// Inspect reads the journal ref. It returns an error wrapping redis.Nil when
// there is none.
func (r *Runner) Inspect(ctx context.Context, ref Ref) (JournalInfo, error) {
	key := r.journalKey(ref)
	meta, err := r.client.HMGet(ctx, key, "st", "t0", "n").Result()
	if err != nil {
		return JournalInfo{}, r.redisErr("inspect", ref, err)
	}
	st, _ := meta[0].(string)
	if st == "" {
		return JournalInfo{}, fmt.Errorf("compensation: no journal %s: %w", ref, redis.Nil)
	}
	info := JournalInfo{Ref: ref, State: State(st)}
	if s, _ := meta[1].(string); s != "" {
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			info.Created = time.UnixMilli(ms).UTC()
		}
	}
	ns, _ := meta[2].(string)
	n, _ := strconv.Atoi(ns)
	n = max(0, min(n, r.cfg.maxSteps))
	if n == 0 {
		return info, nil
	}
	fields := make([]string, 0, n*len(stepFields))
	for i := 1; i <= n; i++ {
		for _, f := range stepFields {
			fields = append(fields, "s:"+strconv.Itoa(i)+":"+f)
		}
	}
	pipe := r.client.Pipeline()
	vals := pipe.HMGet(ctx, key, fields...)
	sizes := make([]*redis.IntCmd, n)
	for i := range n {
		sizes[i] = pipe.HStrLen(ctx, key, "s:"+strconv.Itoa(i+1)+":a")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return JournalInfo{}, r.redisErr("inspect", ref, err)
	}
	v := vals.Val()
	str := func(i int) string { s, _ := v[i].(string); return s }
	for i := range n {
		b := i * len(stepFields)
		att, _ := strconv.Atoi(str(b + 4))
		gen, _ := strconv.Atoi(str(b + 5))
		info.Steps = append(info.Steps, StepRecord{
			Step: i + 1, Name: str(b), Handler: str(b + 1), State: str(b + 2), Done: str(b+3) == "1",
			Attempts: att, Generation: gen, ArgsBytes: int(sizes[i].Val()), Error: str(b + 6),
		})
	}
	return info, nil
}

// List returns up to limit dead-lettered journals, oldest first.
func (r *Runner) List(ctx context.Context, limit int) ([]DeadLetter, error) {
	out := []DeadLetter{}
	err := r.inspectSet(ctx, r.deadKey(), "list dead letters", limit, true, func(info JournalInfo, since time.Time) {
		out = append(out, DeadLetter{JournalInfo: info, Since: since})
	})
	return out, err
}

// inspectSet reads up to limit (default 100) journals of the sorted set key,
// oldest first, and hands each with its score as a time to add. A member
// whose journal has expired is skipped, and removed from key when prune is
// set (the dead-letter set; the recovery index is the sweep's to clean).
func (r *Runner) inspectSet(ctx context.Context, key, what string, limit int, prune bool, add func(JournalInfo, time.Time)) error {
	if limit <= 0 {
		limit = 100
	}
	zs, err := r.client.ZRangeWithScores(ctx, key, 0, int64(limit-1)).Result()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	for _, z := range zs {
		member, _ := z.Member.(string)
		ref, err := ParseRef(member)
		if err != nil {
			continue
		}
		info, err := r.Inspect(ctx, ref)
		if errors.Is(err, redis.Nil) {
			if prune {
				_ = r.client.ZRem(ctx, key, member).Err()
			}
			continue
		}
		if err != nil {
			return err
		}
		add(info, time.UnixMilli(int64(z.Score)).UTC())
	}
	return nil
}

// Retry compensates again every dead-lettered journal of key, once the
// cause of the failures is fixed: dead steps get a fresh set of attempts and
// the compensation resumes in reverse order from the first of them. key is
// the lease name shown by [Runner.List], or the idempotency key when the
// lease name has the form "{tag}:key" (as idempotency.Store.LeaseName makes
// it). It returns how many journals it retried and the errors of those that
// failed again.
func (r *Runner) Retry(ctx context.Context, key string) (int, error) {
	refs, err := r.deadOf(ctx, key)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, ref := range refs {
		if err := r.RetryJournal(ctx, ref); err != nil {
			errs = append(errs, err)
		}
	}
	return len(refs), errors.Join(errs...)
}

// deadScanCount is the COUNT of the ZSCAN calls that look for one key's
// journals in the dead-letter set.
const deadScanCount = 1000

// deadOf returns the dead-lettered journals of key (matchKey). The
// dead-letter set is read in ZSCAN pages that Redis filters by the members'
// ending (":" and key, glob characters escaped), so that only the key's
// members come back, whatever the size of the set.
func (r *Runner) deadOf(ctx context.Context, key string) ([]Ref, error) {
	pattern := "*:" + globEscape(key)
	var (
		refs []Ref
		seen = make(map[string]bool)
		cur  uint64
	)
	for {
		kv, next, err := r.client.ZScan(ctx, r.deadKey(), cur, pattern, deadScanCount).Result()
		if err != nil {
			return nil, fmt.Errorf("%w: list dead letters: %w", ErrUnavailable, err)
		}
		for i := 0; i < len(kv); i += 2 { // member, score
			ref, err := ParseRef(kv[i])
			if err != nil || !matchKey(ref.Name, key) || seen[kv[i]] {
				continue // ZSCAN may return a member twice
			}
			seen[kv[i]] = true
			refs = append(refs, ref)
		}
		if cur = next; cur == 0 {
			return refs, nil
		}
	}
}

// globEscape escapes the characters a Redis MATCH pattern reads as glob
// syntax, so that s matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// RetryJournal compensates one dead-lettered journal again.
func (r *Runner) RetryJournal(ctx context.Context, ref Ref) error {
	if err := r.index(ctx, ref); err != nil {
		return err
	}
	code, err := r.compensate(ctx, ref, modeRetry, true)
	if err == nil && code != scripts.CompBeginAbsent {
		_ = r.client.ZRem(ctx, r.deadKey(), ref.String()).Err()
	}
	return err
}

func matchKey(name, key string) bool {
	if name == key {
		return true
	}
	if strings.HasPrefix(name, "{") {
		if i := strings.IndexByte(name, '}'); i > 0 && strings.HasPrefix(name[i+1:], ":") {
			return name[i+2:] == key
		}
	}
	return false
}
