// Package limit keeps the fleet-wide limits of limit groups in Redis: at
// most N running jobs of a group across all workers, a rate (jobs a second,
// a GCRA with Redis TIME as the clock), and a hold-until that a handler's
// Retry-After sets. A group's keys share one hash tag ({group}), so that one
// script sees all of them on Redis Cluster:
//
//	<prefix>limit:{G}:slots  sorted set: member "key|instance", score = slot deadline (Unix ms)
//	<prefix>limit:{G}:hold   string: the hold's end (Unix ms), expiring with it
//	<prefix>limit:{G}:rate   string: the GCRA theoretical arrival time (Unix us)
//	<prefix>limits           hash: group -> its settings and when a worker last used it
//
// A slot is taken just before a job's claim (limit_acquire.lua), renewed
// with the worker's lease renew rounds, one script a group a round
// (limit_renew.lua), and removed when the job ends or its claim does not
// run it. A slot whose holder died is pruned by the next acquire once its
// deadline (one lease TTL after the last renewal) passed.
//
// The registry is only read to list the groups: a group's keys expire on
// their own, and its field is removed once no worker registered it for
// PruneAge (Prune, one HSCAN page a renew round of each worker).
package limit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
)

// MaxGroupLen bounds a group name kept as it is; a longer one is replaced by
// its SHA-256 (Name).
const MaxGroupLen = 256

// maxSlotsRead bounds the slots Read lists for one group.
const maxSlotsRead = 1000

// maxGroups bounds the groups List returns.
const maxGroups = 10000

// Spec is the limits of a group. The zero Spec limits nothing.
type Spec struct {
	Limit int     // running jobs at most, fleet-wide; 0: no limit
	Rate  float64 // jobs a second, fleet-wide; 0: no rate
	Burst int     // jobs that may start at once within the rate; at least 1
}

// interval is the GCRA emission interval in microseconds (0: no rate).
func (s Spec) interval() int64 {
	if s.Rate <= 0 {
		return 0
	}
	return max(int64(math.Round(1e6/s.Rate)), 1)
}

// Name returns the group name kept in Redis for g: g itself, or the hex
// SHA-256 of a name longer than MaxGroupLen.
func Name(g string) string {
	if len(g) <= MaxGroupLen {
		return g
	}
	sum := sha256.Sum256([]byte(g))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// keys returns the slots, hold and rate keys of group under prefix.
func keys(prefix, group string) []string {
	base := prefix + "limit:{" + group + "}"
	return []string{base + ":slots", base + ":hold", base + ":rate"}
}

// RegistryKey returns the key of the hash that lists the groups in use.
func RegistryKey(prefix string) string { return prefix + "limits" }

// Member returns the slot member of a job's key taken by a worker instance.
func Member(key, instance string) string { return key + "|" + instance }

// Request asks for a running slot of Group for one job.
type Request struct {
	Group  string
	Member string
	TTL    time.Duration // the job's lease TTL
	Spec   Spec
}

// Answer is the answer to one Request.
type Answer struct {
	Status  int           // scripts.LimitAcquired, LimitFull, LimitHeld or LimitRated
	Wait    time.Duration // not acquired: when to look again at the earliest
	Running int           // the group's running slots
	Err     error
}

// Acquire asks for every request's slot in one pipeline. An error applies
// to the whole batch (Redis did not answer).
func Acquire(ctx context.Context, c redis.UniversalClient, prefix string, reqs []Request) ([]Answer, error) {
	cmds, err := pipeline(ctx, c, len(reqs), func(p redis.Pipeliner, i int) *redis.Cmd {
		r := reqs[i]
		return scripts.LimitAcquire.EvalSha(ctx, p, keys(prefix, r.Group), r.Member, r.TTL.Milliseconds(),
			r.Spec.Limit, r.Spec.interval(), max(r.Spec.Burst, 1))
	})
	if err != nil && !isAnswerErr(cmds) {
		return nil, err
	}
	out := make([]Answer, len(reqs))
	for i, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err != nil || len(v) != 3 {
			out[i].Err = cmp(err, fmt.Errorf("limit: acquire answered %v", cmd.Val()))
			continue
		}
		out[i] = Answer{Status: int(v[0]), Wait: time.Duration(v[1]) * time.Millisecond, Running: int(v[2])}
	}
	return out, nil
}

func cmp(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// isAnswerErr reports whether every failed command failed with an answer
// of Redis (a script error), not a lost connection.
func isAnswerErr(cmds []*redis.Cmd) bool {
	for _, c := range cmds {
		var re redis.Error
		if c != nil && c.Err() != nil && !errors.As(c.Err(), &re) {
			return false
		}
	}
	return true
}

// Slot is a running slot a worker holds.
type Slot struct {
	Group  string
	Member string
	TTL    time.Duration
	Spec   Spec // the group's limits, registered while the slot runs
}

// Release gives slots back, in one pipeline.
func Release(ctx context.Context, c redis.UniversalClient, prefix string, slots []Slot) error {
	if len(slots) == 0 {
		return nil
	}
	p := c.Pipeline()
	for _, s := range slots {
		p.ZRem(ctx, keys(prefix, s.Group)[0], s.Member)
	}
	_, err := p.Exec(ctx)
	return err
}

// Renew moves the deadlines of slots, one script a group, all in one
// pipeline. It returns how many slots were renewed (a slot missing was
// pruned or released meanwhile).
func Renew(ctx context.Context, c redis.UniversalClient, prefix string, slots []Slot) (int, error) {
	byGroup := make(map[string][]any)
	var order []string
	for _, s := range slots {
		if _, ok := byGroup[s.Group]; !ok {
			order = append(order, s.Group)
		}
		byGroup[s.Group] = append(byGroup[s.Group], s.Member, s.TTL.Milliseconds())
	}
	cmds, err := pipeline(ctx, c, len(order), func(p redis.Pipeliner, i int) *redis.Cmd {
		return scripts.LimitRenew.EvalSha(ctx, p, keys(prefix, order[i])[:1], byGroup[order[i]]...)
	})
	n := 0
	for _, cmd := range cmds {
		if cmd != nil {
			v, _ := cmd.Int64()
			n += int(v)
		}
	}
	return n, err
}

// Hold holds every job of group for d, fleet-wide; a longer hold in place
// stays. It returns the hold left.
func Hold(ctx context.Context, c redis.UniversalClient, prefix, group string, d time.Duration) (time.Duration, error) {
	ms, err := scripts.LimitHold.Run(ctx, c, keys(prefix, group)[1:2], max(d.Milliseconds(), 1)).Int64()
	return time.Duration(ms) * time.Millisecond, err
}

// Unhold ends group's hold. It reports whether the group was held.
func Unhold(ctx context.Context, c redis.UniversalClient, prefix, group string) (bool, error) {
	n, err := c.Del(ctx, keys(prefix, group)[1]).Result()
	return n > 0, err
}

// Register records groups in the registry with their settings and the
// time, so that operators can list them (one HSET).
func Register(ctx context.Context, c redis.UniversalClient, prefix string, groups map[string]Spec, now time.Time) error {
	if len(groups) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(groups))
	for g, s := range groups {
		args = append(args, g, fmt.Sprintf("%d %g %d %d", s.Limit, s.Rate, s.Burst, now.UnixMilli()))
	}
	return c.HSet(ctx, RegistryKey(prefix), args...).Err()
}

// PruneAge is how long a group stays in the registry after a worker last
// registered it. A worker registers the groups it took, or was refused, a
// slot of at its next renew round, and those of its running jobs at least
// every PruneAge/4; a group dropped is registered again when used again.
const PruneAge = 24 * time.Hour

// PrunePage is the COUNT of the HSCAN page Prune reads a call (a hint:
// Redis may return a few fields more).
const PrunePage = registryScanCount

// Prune reads one HSCAN page of the registry from cursor (COUNT PrunePage)
// and removes the groups of it last registered before cutoff, in one
// script that reads each again and removes it only if it is still older
// (another worker may register it in between). cutoff is on the workers'
// clock, the one Register's now is read from. It returns the cursor of the
// next page (0: the scan went round) and how many groups it removed; on an
// error, cursor.
func Prune(ctx context.Context, c redis.UniversalClient, prefix string, cursor uint64, cutoff time.Time) (uint64, int, error) {
	key := RegistryKey(prefix)
	kv, next, err := c.HScan(ctx, key, cursor, "", PrunePage).Result()
	if err != nil {
		return cursor, 0, err
	}
	args := []any{cutoff.UnixMilli()}
	for i := 0; i+1 < len(kv); i += 2 {
		if _, seen := parseReg(kv[i+1]); !seen.IsZero() && seen.Before(cutoff) {
			args = append(args, kv[i])
		}
	}
	if len(args) == 1 {
		return next, 0, nil
	}
	n, err := scripts.LimitPrune.Run(ctx, c, []string{key}, args...).Int()
	if err != nil {
		return cursor, 0, err
	}
	return next, n, nil
}

// Info is what Read tells about one group.
type Info struct {
	Group    string
	Spec     Spec      // as the last worker that used it registered it
	Seen     time.Time // when a worker last registered it; zero if never
	Running  int       // running slots (expired ones not counted)
	HeldFor  time.Duration
	HeldTill time.Time
	Slots    []SlotInfo
}

// SlotInfo is one running slot.
type SlotInfo struct {
	Member   string
	Deadline time.Time
}

// Read returns the state of groups (one pipeline); with no group given, of
// at most maxGroups groups of the registry. The registry keeps every group a
// worker used within PruneAge (one a tenant with WithLimitKey), so it is
// read in bounded HSCAN pages, and only the fields of the groups named
// otherwise.
func Read(ctx context.Context, c redis.UniversalClient, prefix string, groups ...string) ([]Info, error) {
	reg, groups, err := readRegistry(ctx, c, prefix, groups)
	if err != nil {
		return nil, err
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	p := c.Pipeline()
	slots := make([]*redis.ZSliceCmd, len(groups))
	holds := make([]*redis.DurationCmd, len(groups))
	for i, g := range groups {
		k := keys(prefix, g)
		slots[i] = p.ZRangeByScoreWithScores(ctx, k[0], &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf", Count: maxSlotsRead})
		holds[i] = p.PTTL(ctx, k[1])
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]Info, len(groups))
	for i, g := range groups {
		in := Info{Group: g}
		in.Spec, in.Seen = parseReg(reg[g])
		for _, z := range slots[i].Val() {
			in.Slots = append(in.Slots, SlotInfo{Member: z.Member.(string), Deadline: time.UnixMilli(int64(z.Score))})
		}
		in.Running = len(in.Slots)
		if d := holds[i].Val(); d > 0 {
			in.HeldFor, in.HeldTill = d, now.Add(d)
		}
		out[i] = in
	}
	return out, nil
}

// registryScanCount is the COUNT of the HSCAN calls that read the registry,
// and registryScanCalls bounds them (HSCAN may return an element twice).
const (
	registryScanCount = 1000
	registryScanCalls = 2 * maxGroups / registryScanCount
)

// readRegistry reads the registry's settings of groups (HMGET), or with no
// group given up to maxGroups groups and their settings (HSCAN pages).
func readRegistry(ctx context.Context, c redis.UniversalClient, prefix string, groups []string) (map[string]string, []string, error) {
	key := RegistryKey(prefix)
	if len(groups) > 0 {
		vals, err := c.HMGet(ctx, key, groups...).Result()
		if err != nil {
			return nil, nil, err
		}
		reg := make(map[string]string, len(groups))
		for i, v := range vals {
			if s, ok := v.(string); ok {
				reg[groups[i]] = s
			}
		}
		return reg, groups, nil
	}
	reg := make(map[string]string)
	var cur uint64
	for range registryScanCalls {
		kv, next, err := c.HScan(ctx, key, cur, "", registryScanCount).Result()
		if err != nil {
			return nil, nil, err
		}
		for i := 0; i+1 < len(kv) && len(reg) < maxGroups; i += 2 {
			reg[kv[i]] = kv[i+1]
		}
		if cur = next; cur == 0 || len(reg) >= maxGroups {
			break
		}
	}
	groups = make([]string, 0, len(reg))
	for g := range reg {
		groups = append(groups, g)
	}
	return reg, groups, nil
}

func parseReg(v string) (Spec, time.Time) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return Spec{}, time.Time{}
	}
	var s Spec
	s.Limit, _ = strconv.Atoi(f[0])
	s.Rate, _ = strconv.ParseFloat(f[1], 64)
	s.Burst, _ = strconv.Atoi(f[2])
	ms, _ := strconv.ParseInt(f[3], 10, 64)
	return s, time.UnixMilli(ms)
}

// pipeline sends n scripts built by add in one pipeline; scripts the server
// answered NOSCRIPT (its script cache was flushed) are loaded and sent once
// more. err is the first error left.
func pipeline(ctx context.Context, c redis.UniversalClient, n int, add func(p redis.Pipeliner, i int) *redis.Cmd) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	run := func(idx []int) error {
		p := c.Pipeline()
		for _, i := range idx {
			cmds[i] = add(p, i)
		}
		_, err := p.Exec(ctx)
		return err
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if n == 0 {
		return cmds, nil
	}
	err := run(all)
	if err == nil {
		return cmds, nil
	}
	var again []int
	for i, cmd := range cmds {
		if cmd.Err() != nil && strings.HasPrefix(cmd.Err().Error(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds, err
	}
	for _, s := range []*redis.Script{scripts.LimitAcquire, scripts.LimitRenew} {
		if lerr := s.Load(ctx, c).Err(); lerr != nil {
			return cmds, lerr
		}
	}
	err = run(again)
	return cmds, err
}
