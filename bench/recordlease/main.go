// Command recordlease measures what a record that carries its own lease would
// save in Redis CPU, before anyone rewrites the library for it.
//
// Today a claim writes a lease key beside the key's record (one SET NX PX at
// the claim, a GETDEL at the completion). The
// prototype scripts in this directory (claim_record.lua, complete_record.lua)
// keep the owner token and a deadline in the PROCESSING record instead and
// check them against Redis TIME. The program runs, on a private redis-server,
// the library's own scripts (scripts.IdemClaim, scripts.IdemCompleteBatch) with the
// keys and arguments the idempotency Store sends, and the prototype with the
// same batches, alternating, and prints one figure a line (name=value unit):
//
//	lease_key_redis_cpu_us_per_job      Redis main-thread CPU per claim + complete, shipped scripts
//	record_lease_redis_cpu_us_per_job   the same with the prototype
//	lease_key_calls_per_job             commands the scripts call per job (INFO commandstats)
//	record_lease_calls_per_job          the same with the prototype
//	lease_key_jobs_per_s                claims + completions a second (the client shares the machine)
//	record_lease_jobs_per_s             the same with the prototype
//	record_lease_saving_pct             how much less Redis CPU a job takes with the prototype
//
// Then it holds -renew-leases leases each way and renews every one of them
// once a round, each way in turn: a pipelined PEXPIRE of the lease keys (the
// floor), the renewer's GETEX key PX ttl (what the library sends), and
// renew_record.lua, which would renew a lease kept in the record (read the
// record, check token, fence and deadline, write it back with the new
// deadline), all in calls of 256, 4 in flight:
//
//	renew_pexpire_redis_cpu_ms          Redis CPU a round of PEXPIRE
//	renew_getex_redis_cpu_ms            the same with GETEX (the shipped renewer)
//	renew_record_redis_cpu_ms           the same with renew_record.lua
//	renew_getex_vs_pexpire, renew_record_vs_pexpire   their ratios to PEXPIRE
//
// Before measuring, both variants go through the same checks (held while
// leased, a wrong token refused, duplicate and mismatch answers, takeover
// after the lease ran out, the old owner's completion refused): a prototype
// that skipped the lease check would measure nothing. The prototype leaves out
// what a job seldom meets (other layouts' buckets, corrupt-record answers)
// and everything beyond the claim and the completion: heartbeat details, the
// renewer, compensation journals and the tools that read the lease key.
package main

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
)

var (
	//go:embed claim_record.lua
	claimRecordSrc string
	//go:embed complete_record.lua
	completeRecordSrc string

	claimRecord    = redis.NewScript(claimRecordSrc)
	completeRecord = redis.NewScript(completeRecordSrc)
)

// The layout measured: a 7-day retention cut in 2 windows, and -shards
// shards (default idempotency.DefaultShards; the figures in
// docs/benchmarks.md before 2026-11-27 evening were taken with 65,536, the
// default then); a claim passes windows+1 buckets, a completion the current
// one.
const (
	retention = 7 * 24 * time.Hour
	windows   = 2
)

var shards uint32 = idempotency.DefaultShards

var windowLen = retention / windows

func main() {
	n := flag.Int("n", 200_000, "jobs a run")
	flag.Func("shards", "shards the keys are spread over (idempotency.WithShards; default idempotency.DefaultShards)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 || n > 1<<24 {
			return fmt.Errorf("shards must be 1 to 2^24, got %q", v)
		}
		shards = uint32(n)
		return nil
	})
	batch := flag.Int("batch", 64, "jobs a script call (claims, then completions)")
	conc := flag.Int("concurrency", 4, "calls in flight at once")
	rounds := flag.Int("rounds", 3, "rounds; each runs both variants, in turn")
	leases := flag.Int("renew-leases", 10_000, "leases held for the renewal rounds (0: no renewal rounds)")
	renewRounds := flag.Int("renew-rounds", 5, "renewal rounds; each renews every lease once each way, in turn")
	flag.Parse()
	if *n <= 0 || *batch <= 0 || *conc <= 0 || *rounds <= 0 || *leases < 0 || *renewRounds <= 0 {
		fmt.Fprintln(os.Stderr, "recordlease: -n, -batch, -concurrency, -rounds and -renew-rounds must be positive, -renew-leases not negative")
		os.Exit(2)
	}
	if err := run(*n, *batch, *conc, *rounds, *leases, *renewRounds); err != nil {
		log.Fatalf("recordlease: %v", err)
	}
}

func run(n, batch, conc, rounds, leases, renewRounds int) error {
	ctx := context.Background()
	srv, err := benchkit.StartRedis("")
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	defer srv.Stop()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 2 * conc})
	defer func() { _ = c.Close() }()

	variants := newVariants()
	for _, v := range variants {
		if err := v.check(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	for r := 0; r < rounds; r++ {
		for i := range variants {
			v := variants[(i+r)%len(variants)] // which goes first turns each round
			if err := v.measure(ctx, c, n, batch, conc); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			if err := c.FlushAll(ctx).Err(); err != nil {
				return err
			}
		}
	}
	fig := benchkit.NewFigures(os.Stdout)
	for _, v := range variants {
		fig.Float(v.name+"_redis_cpu_us_per_job", median(v.cpu), 2, "us")
		fig.Float(v.name+"_calls_per_job", median(v.calls), 2, "calls")
		fig.Float(v.name+"_jobs_per_s", median(v.rate), 0, "jobs/s")
	}
	before, after := median(variants[0].cpu), median(variants[1].cpu)
	fig.Float("record_lease_saving_pct", 100*(before-after)/before, 1, "%")
	fig.Int("jobs_per_run", int64(n), "jobs")
	fig.Int("batch", int64(batch), "jobs")
	fig.Int("rounds", int64(rounds), "rounds")
	if leases > 0 {
		ways, err := measureRenewals(ctx, c, leases, renewRounds)
		if err != nil {
			return err
		}
		floor := median(ways[0].cpu)
		for _, w := range ways {
			fig.Float("renew_"+w.name+"_redis_cpu_ms", median(w.cpu), 2, "ms")
		}
		for _, w := range ways[1:] {
			fig.Float("renew_"+w.name+"_vs_pexpire", median(w.cpu)/floor, 2, "x")
		}
		fig.Int("renew_leases", int64(leases), "leases")
		fig.Int("renew_rounds", int64(renewRounds), "rounds")
	}
	return fig.Err()
}

// variant is one way of claiming and completing: the shipped scripts with a
// lease key, or the prototype with the lease in the record.
type variant struct {
	name           string
	record         bool // the prototype's keys and arguments (no lease key)
	claimScript    *redis.Script
	completeScript *redis.Script

	cpu, calls, rate []float64 // one per measured run
	buckets          []int     // the buckets a measured run's claims wrote into, one per run
}

func newVariants() []*variant {
	return []*variant{
		{name: "lease_key", claimScript: scripts.IdemClaim, completeScript: scripts.IdemCompleteBatch},
		{name: "record_lease", record: true, claimScript: claimRecord, completeScript: completeRecord},
	}
}

// job is one idempotency key with the names and values the Store derives
// from it.
type job struct {
	key, field, fp, tag, token string
	ttl                        time.Duration

	fence, attempt int64
	window         int64 // of the claim
}

func newJob(key string, ttl time.Duration) *job {
	h := sha256.Sum256([]byte(key))
	shard := (uint32(h[16])<<24 | uint32(h[17])<<16 | uint32(h[18])<<8 | uint32(h[19])) % shards
	fp := sha256.Sum256([]byte("payload of " + key))
	return &job{key: key, field: string(h[:16]), fp: string(fp[:8]), tag: "{i:" + strconv.Itoa(int(shard)) + "}",
		token: leasing.NewToken(), ttl: ttl}
}

func (j *job) leaseKey() string   { return "lease:" + j.tag + ":" + j.key }
func (j *job) detailsKey() string { return "idem:d:" + j.tag + ":" + j.key }
func (j *job) resultKey() string  { return "idem:r:" + j.tag + ":" + j.key }
func (j *job) historyKey() string { return "idem:h:" + j.tag + ":" + j.key }
func (j *job) cancelKey() string  { return "idem:x:" + j.tag + ":" + j.key }
func (j *job) bucket(w int64) string {
	return "idem:b:" + j.tag + ":" + strconv.FormatInt(w*windowLen.Milliseconds(), 10)
}

// claim runs the claim of jobs and returns each entry's code; on codes 1
// and 2 it stores the fence, attempt and window in the job. The library's
// script is sent as the Store sends it: a short call first, then a full one
// for the entries that found a record (code 8).
func (v *variant) claim(ctx context.Context, c *redis.Client, jobs []*job) ([]int64, error) {
	codes, err := v.claimCall(ctx, c, jobs, !v.record)
	if err != nil || v.record {
		return codes, err
	}
	var redo []int
	for i, code := range codes {
		if code == scripts.IdemClaimFull {
			redo = append(redo, i)
		}
	}
	return v.again(codes, redo, func(sub []*job) ([]int64, error) { return v.claimCall(ctx, c, sub, false) }, jobs)
}

// again sends the entries redo of jobs once more with send and puts their
// codes into codes.
func (v *variant) again(codes []int64, redo []int, send func([]*job) ([]int64, error), jobs []*job) ([]int64, error) {
	if len(redo) == 0 {
		return codes, nil
	}
	sub := make([]*job, len(redo))
	for i, r := range redo {
		sub[i] = jobs[r]
	}
	got, err := send(sub)
	if err != nil {
		return nil, err
	}
	for i, r := range redo {
		codes[r] = got[i]
	}
	return codes, nil
}

// claimCall runs one claim call for jobs (short: the library's short call,
// the lease key, the result key and the buckets alone) and returns each
// entry's code.
func (v *variant) claimCall(ctx context.Context, c *redis.Client, jobs []*job, short bool) ([]int64, error) {
	now := time.Now() // the server is local: no TIME call a batch, as the Store keeps a calibrated clock
	wl := windowLen.Milliseconds()
	base, nw := now.UnixMilli()/wl-windows, windows+1
	var keys []string
	args := []any{base, wl, windows, retention.Milliseconds(), nw}
	if !v.record {
		args = append(args, 0, 0, 0, short) // no other layouts' buckets, no history
	}
	for _, j := range jobs {
		if !v.record {
			keys = append(keys, j.leaseKey())
		}
		if !short {
			keys = append(keys, j.detailsKey())
		}
		keys = append(keys, j.resultKey())
		for w := base; w < base+int64(nw); w++ {
			keys = append(keys, j.bucket(w))
		}
		args = append(args, j.field, j.fp, j.token, j.ttl.Milliseconds())
		if !v.record {
			if !short {
				keys = append(keys, j.historyKey(), j.cancelKey())
			}
			args = append(args, "") // no history entry
		}
	}
	replies, err := v.claimScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(replies) != len(jobs) {
		return nil, fmt.Errorf("claim: %d replies for %d entries", len(replies), len(jobs))
	}
	codes := make([]int64, len(jobs))
	for i, j := range jobs {
		switch r := replies[i].(type) {
		case string: // acquired or takeover, packed: '>BI7I2I7I7BB' (idem_claim.lua)
			if len(r) < 26 || r[0] != 1 && r[0] != 2 {
				return nil, fmt.Errorf("claim: malformed reply %q", r)
			}
			codes[i], j.fence, j.attempt, j.window = int64(r[0]), int64(be(r[1:8])), int64(be(r[8:10])), int64(be(r[17:24])) //nolint:gosec // 56 bits
		case []any:
			if len(r) == 0 {
				return nil, fmt.Errorf("claim: malformed reply %v", r)
			}
			codes[i], _ = r[0].(int64)
		default:
			return nil, fmt.Errorf("claim: malformed reply %v", r)
		}
	}
	return codes, nil
}

// complete runs the completion (state completed, empty result) of jobs
// and returns each entry's code. The library's script is sent as the Store
// sends it: in a short call when the claims' window is the current one
// (nearly always), then in a full one for the entries that answered -4.
func (v *variant) complete(ctx context.Context, c *redis.Client, jobs []*job) ([]int64, error) {
	cur := time.Now().UnixMilli() / windowLen.Milliseconds()
	short := !v.record
	for _, j := range jobs {
		short = short && j.window == cur
	}
	codes, err := v.completeCall(ctx, c, jobs, cur, short)
	if err != nil || !short {
		return codes, err
	}
	var redo []int
	for i, code := range codes {
		if code == scripts.IdemCompleteFull {
			redo = append(redo, i)
		}
	}
	return v.again(codes, redo, func(sub []*job) ([]int64, error) { return v.completeCall(ctx, c, sub, cur, false) }, jobs)
}

// completeCall runs one completion call for jobs in window cur (short: the
// library's short call, the lease key and the claim's bucket alone).
func (v *variant) completeCall(ctx context.Context, c *redis.Client, jobs []*job, cur int64, short bool) ([]int64, error) {
	wl := windowLen.Milliseconds()
	var keys []string
	args := []any{cur, wl, retention.Milliseconds(), 1}
	if !v.record {
		args = append(args, 0, 0, short) // no history
	}
	for _, j := range jobs {
		if !v.record {
			keys = append(keys, j.leaseKey())
		}
		if short {
			keys = append(keys, j.bucket(j.window))
		} else {
			keys = append(keys, j.detailsKey(), j.resultKey(), j.bucket(j.window), j.bucket(cur))
		}
		if v.record {
			args = append(args, j.token, strconv.FormatInt(j.fence, 10), j.field, j.fp, j.attempt, 3, "0", "0", "")
		} else {
			if !short {
				keys = append(keys, j.historyKey())
			}
			args = append(args, j.packedCompletion(), "") // delete the lease key; no history
		}
	}
	replies, err := v.completeScript.Run(ctx, c, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(replies) != len(jobs) {
		return nil, fmt.Errorf("complete: %d replies for %d entries", len(replies), len(jobs))
	}
	return replies, nil
}

// packedCompletion is j's completion entry as idem_complete_batch.lua
// takes it (idempotency's completeEntry): state completed, no external
// result, no details, the lease key deleted, ended as completed; the head of
// the record to write (state completed, fence, fingerprint, attempt, no
// carried history entry), then the field and the lease value's prefix.
func (j *job) packedCompletion() string {
	b := []byte{3, 0, 0, 1, 1, 0, 3}
	var f [8]byte
	binary.BigEndian.PutUint64(f[:], uint64(j.fence)) //nolint:gosec // fences are positive
	b = append(append(b, f[1:]...), j.fp...)
	b = binary.BigEndian.AppendUint16(b, uint16(j.attempt)) //nolint:gosec // a first attempt
	b = append(binary.BigEndian.AppendUint16(b, 0), j.field...)
	return string(b) + j.token + " " + strconv.FormatInt(j.fence, 10) + " "
}

// check runs the cases the measurement relies on and fails unless each
// answers as the library's scripts do.
func (v *variant) check(ctx context.Context, c *redis.Client) error {
	one := func(what string, got []int64, err error, want int64) error {
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case got[0] != want:
			return fmt.Errorf("%s: code %d, want %d", what, got[0], want)
		}
		return nil
	}
	a := newJob("check-"+uuid.NewString(), time.Minute)
	codes, err := v.claim(ctx, c, []*job{a})
	if err := one("first claim", codes, err, 1); err != nil {
		return err
	}
	other := *a
	other.token = leasing.NewToken()
	codes, err = v.claim(ctx, c, []*job{&other})
	if err := one("claim while leased", codes, err, 3); err != nil {
		return err
	}
	other.fence, other.window = a.fence, a.window
	codes, err = v.complete(ctx, c, []*job{&other})
	if err := one("complete with another token", codes, err, -1); err != nil {
		return err
	}
	codes, err = v.complete(ctx, c, []*job{a})
	if err := one("complete", codes, err, 1); err != nil {
		return err
	}
	codes, err = v.complete(ctx, c, []*job{a})
	if err := one("complete sent again", codes, err, 1); err != nil {
		return err
	}
	codes, err = v.claim(ctx, c, []*job{&other})
	if err := one("claim after completion", codes, err, 4); err != nil {
		return err
	}
	other.fp = "other fp"
	codes, err = v.claim(ctx, c, []*job{&other})
	if err := one("claim with another payload", codes, err, 5); err != nil {
		return err
	}

	b := newJob("check-"+uuid.NewString(), 50*time.Millisecond)
	codes, err = v.claim(ctx, c, []*job{b})
	if err := one("short lease", codes, err, 1); err != nil {
		return err
	}
	time.Sleep(120 * time.Millisecond)
	taker := *b
	taker.token, taker.ttl = leasing.NewToken(), time.Minute
	codes, err = v.claim(ctx, c, []*job{&taker})
	if err := one("claim after the lease ran out", codes, err, 2); err != nil {
		return err
	}
	if taker.fence <= b.fence {
		return fmt.Errorf("takeover fence %d not above %d", taker.fence, b.fence)
	}
	codes, err = v.complete(ctx, c, []*job{b})
	if err := one("the old owner's completion", codes, err, -1); err != nil {
		return err
	}
	codes, err = v.complete(ctx, c, []*job{&taker})
	return one("the new owner's completion", codes, err, 1)
}

// measure claims and completes n fresh keys in calls of batch entries, conc
// calls in flight, and records the Redis CPU and calls per job and the rate.
func (v *variant) measure(ctx context.Context, c *redis.Client, n, batch, conc int) error {
	batches := make(chan []*job, conc)
	go func() {
		defer close(batches)
		for i := 0; i < n; i += batch {
			jobs := make([]*job, 0, batch)
			for range min(batch, n-i) {
				jobs = append(jobs, newJob(uuid.NewString(), 30*time.Second))
			}
			batches <- jobs
		}
	}()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	cpu0, err := benchkit.RedisMainCPU(ctx, c)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	buckets := map[string]bool{}
	start := time.Now()
	err = benchkit.Each(batches, conc, func(jobs []*job) error {
		for _, step := range []func(context.Context, *redis.Client, []*job) ([]int64, error){v.claim, v.complete} {
			codes, err := step(ctx, c, jobs)
			if err != nil {
				return err
			}
			if err := allDone("job", jobs, codes); err != nil {
				return err
			}
		}
		mu.Lock()
		for _, j := range jobs {
			buckets[j.bucket(j.window)] = true
		}
		mu.Unlock()
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	cpu1, err := benchkit.RedisMainCPU(ctx, c)
	if err != nil {
		return err
	}
	calls, err := scriptCalls(ctx, c)
	if err != nil {
		return err
	}
	v.cpu = append(v.cpu, (cpu1-cpu0)*1e6/float64(n))
	v.calls = append(v.calls, float64(calls)/float64(n))
	v.buckets = append(v.buckets, len(buckets))
	v.rate = append(v.rate, float64(n)/elapsed.Seconds())
	return nil
}

// scriptCalls returns how many times, since the last CONFIG RESETSTAT, the
// scripts called the data commands they use (TIME aside: one a script call,
// whatever its size; the client's own commands are not counted).
func scriptCalls(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(k, "cmdstat_")
		if !ok || !isCmd || !slices.Contains(scriptCommands, name) {
			continue
		}
		for f := range strings.SplitSeq(v, ",") {
			if s, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return 0, err
				}
				total += n
			}
		}
	}
	return total, nil
}

// scriptCommands are the commands the scripts of both variants call, TIME
// aside.
var scriptCommands = []string{"get", "getdel", "set", "del", "hget", "hmget", "hset", "hdel", "pexpire", "pexpireat", "pttl"}

// allDone fails unless every job's code is 1 (done), naming the first that
// is not.
func allDone(what string, jobs []*job, codes []int64) error {
	for i, code := range codes {
		if code != 1 {
			return fmt.Errorf("%s %s: code %d", what, jobs[i].key, code)
		}
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// be reads the big-endian unsigned integer b (up to 8 bytes).
func be(b string) uint64 {
	var v uint64
	for i := range len(b) {
		v = v<<8 | uint64(b[i])
	}
	return v
}
