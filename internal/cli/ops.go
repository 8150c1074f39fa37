package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

// opsFlags are the flags of the operator commands.
type opsFlags struct {
	redisURL, prefix string
	policy           *string // policy.go
}

func (o *opsFlags) define(f *flags) {
	f.stringVar(&o.redisURL, "redis", "REDIS_URL", DefaultRedisURL, "Redis URL")
	f.stringVar(&o.prefix, "prefix", "LEASEHOLD_PREFIX", "lh:", "Redis key prefix")
	o.policy = policyFlag(f)
}

// opsStore connects to Redis and builds the lease manager and the
// idempotency store the worker uses, to name keys the way it does.
type opsStore struct {
	rdb redis.UniversalClient
	m   *lease.Manager
	s   *idempotency.Store
}

func openOps(ctx context.Context, o opsFlags) (*opsStore, error) {
	policy, err := policyOpts(*o.policy)
	if err != nil {
		return nil, err
	}
	rdb, err := openRedis(ctx, o.redisURL)
	if err != nil {
		return nil, err
	}
	m, err := lease.NewManager(rdb, lease.WithPrefix(o.prefix))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	s, err := idempotency.New(ctx, rdb, m, append(policy, idempotency.WithPrefix(o.prefix), idempotency.WithMaxKeyLen(leasehold.MaxKeyLen))...)
	if err != nil {
		_ = m.Shutdown(ctx)
		_ = rdb.Close()
		return nil, policyHint(err)
	}
	return &opsStore{rdb: rdb, m: m, s: s}, nil
}

func (o *opsStore) close(ctx context.Context) {
	_ = o.m.Shutdown(context.WithoutCancel(ctx))
	_ = o.rdb.Close()
}

// leaseInfo is one lease as stored in Redis.
type leaseInfo struct {
	Key       string // the Redis key
	Name      string // the lease name (hash tag + idempotency key)
	Owner     string // a digest of the owner token (the token itself is a capability)
	Fence     uint64
	Remaining time.Duration
	lease     string // the lease name as stored, tag included

	// The idempotency record of the key, when the lease is an idempotency
	// key's (see withRecords).
	Record *idempotency.Info
	RecErr error
}

func ownerDigest(token string) string {
	if token == "" {
		return "-"
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}

func readLease(ctx context.Context, rdb redis.UniversalClient, key string) (leaseInfo, bool, error) {
	p := rdb.Pipeline()
	h := p.HMGet(ctx, key, "tok", "fen")
	ttl := p.PTTL(ctx, key)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return leaseInfo{}, false, err
	}
	vals := h.Val()
	tok, _ := vals[0].(string)
	if tok == "" {
		return leaseInfo{}, false, nil
	}
	fenS, _ := vals[1].(string)
	fen, _ := strconv.ParseUint(fenS, 10, 64)
	return leaseInfo{Key: key, Owner: ownerDigest(tok), Fence: fen, Remaining: max(ttl.Val(), 0)}, true, nil
}

func keyArg(f *flags) (string, error) {
	if f.NArg() != 1 {
		return "", usagef("want exactly one argument, the idempotency key")
	}
	k := f.Arg(0)
	if err := leasehold.ValidateKey(k); err != nil {
		return "", &usageError{err}
	}
	return k, nil
}

// openKeyCommand parses the flags (the common ones and those extra
// defines) and the KEY argument of a command that works on one idempotency
// key, and opens the store.
func openKeyCommand(ctx context.Context, e *Env, name string, args []string, extra ...func(*flags)) (string, *opsStore, error) {
	f := newFlags(e, name, "KEY")
	var o opsFlags
	o.define(f)
	for _, x := range extra {
		x(f)
	}
	if err := f.parse(args); err != nil {
		return "", nil, err
	}
	k, err := keyArg(f)
	if err != nil {
		return "", nil, err
	}
	ops, err := openOps(ctx, o)
	if err != nil {
		return "", nil, err
	}
	return k, ops, nil
}

func cmdInspect(ctx context.Context, e *Env, args []string) error {
	asJSON := false
	k, ops, err := openKeyCommand(ctx, e, "inspect", args, func(f *flags) {
		f.BoolVar(&asJSON, "json", false, "print JSON (fields: key, cluster_tag, lease_key, lease, record)")
	})
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	name := ops.s.LeaseName(k)
	li, held, err := readLease(ctx, ops.rdb, ops.m.Key(name))
	if err != nil {
		return err
	}
	if asJSON {
		info, err := lookupForInspect(ctx, ops.s, k)
		if err != nil {
			return err
		}
		return writeJSON(e.Stdout, newInspectJSON(k, ops.s.Tag(k), ops.m.Key(name), li, held, info))
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "key\t%s\n", k)
	_, _ = fmt.Fprintf(tw, "cluster tag\t%s\n", ops.s.Tag(k))
	_, _ = fmt.Fprintf(tw, "lease key\t%s\n", ops.m.Key(name))
	if held {
		_, _ = fmt.Fprintf(tw, "lease\theld\n")
		_, _ = fmt.Fprintf(tw, "owner\t%s (token digest)\n", li.Owner)
		_, _ = fmt.Fprintf(tw, "fence\t%d\n", li.Fence)
		_, _ = fmt.Fprintf(tw, "remaining\t%s\n", li.Remaining.Round(time.Millisecond))
	} else {
		_, _ = fmt.Fprintf(tw, "lease\tnone (free, finished, or never seen)\n")
	}
	info, err := lookupForInspect(ctx, ops.s, k)
	if err != nil {
		_, _ = fmt.Fprintf(tw, "record\tunreadable: %s\n", truncate(err.Error(), 200))
		_ = tw.Flush()
		return err
	}
	_, _ = fmt.Fprintf(tw, "record\t%s\n", info.State)
	if info.State != idempotency.Absent {
		_, _ = fmt.Fprintf(tw, "record fence\t%d\n", info.Fence)
		_, _ = fmt.Fprintf(tw, "attempt\t%d\n", info.Attempt)
	}
	switch info.State {
	case idempotency.Completed, idempotency.Failed:
		_, _ = fmt.Fprintf(tw, "finished at\t%s\n", info.At.UTC().Format(time.RFC3339))
		if info.State == idempotency.Failed {
			_, _ = fmt.Fprintf(tw, "error\t%s\n", printable(info.Result, info.ResultSize, maxShownError))
		} else {
			_, _ = fmt.Fprintf(tw, "result\t%d bytes\n", info.ResultSize)
		}
	case idempotency.Released:
		if !info.HoldUntil.IsZero() {
			_, _ = fmt.Fprintf(tw, "held until\t%s\n", info.HoldUntil.UTC().Format(time.RFC3339Nano))
		}
	}
	if info.HasDetails {
		_, _ = fmt.Fprintf(tw, "heartbeat details\t%s\n", printable(info.Details, info.DetailsSize, maxShownDetails))
		_, _ = fmt.Fprintf(tw, "details kept for\t%s\n", info.DetailsTTL.Round(time.Second))
	} else {
		_, _ = fmt.Fprintf(tw, "heartbeat details\tnone\n")
	}
	return tw.Flush()
}

// maxShownDetails bounds the heartbeat details inspect prints, in bytes;
// leases prints at most maxListedDetails; maxShownError bounds a failed
// record's error text.
const (
	maxShownDetails  = 512
	maxListedDetails = 40
	maxShownError    = 1024
)

// lookupForInspect reads key k's record, with the error text of a FAILED one
// (the failure is what an operator inspects it for); a result is not read,
// only its size.
func lookupForInspect(ctx context.Context, s *idempotency.Store, k string) (idempotency.Info, error) {
	info, err := s.Lookup(ctx, k)
	if err != nil || info.State != idempotency.Failed {
		return info, err
	}
	return s.LookupResult(ctx, k)
}

// printable renders heartbeat details b (of stored size total) as a quoted
// Go string of at most n bytes of the details, control characters and
// invalid UTF-8 escaped, with the full size when they were cut.
func printable(b []byte, total, n int) string {
	if len(b) > n {
		// Cut at a rune start, so that a rune is not shown as escaped bytes.
		for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				n = i
				break
			}
		}
		b = b[:n]
	}
	q := strconv.Quote(string(b))
	if total > len(b) {
		q += fmt.Sprintf("... (%d bytes)", total)
	}
	return q
}

// withRecords adds to each lease of an idempotency key the key's record
// (state, attempt, heartbeat details). Leases named otherwise are left as
// they are.
func withRecords(ctx context.Context, s *idempotency.Store, leases []leaseInfo) {
	for i := range leases {
		l := &leases[i]
		if l.lease == "" || s.LeaseName(l.Name) != l.lease {
			continue
		}
		info, err := s.Lookup(ctx, l.Name)
		l.Record, l.RecErr = &info, err
	}
}

func cmdLeases(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "leases", "")
	var o opsFlags
	o.define(f)
	limit := f.Int("limit", 1000, "list at most this many leases, at least 1")
	asJSON := f.Bool("json", false, "print JSON: {\"leases\": [{key, lease_key, owner, fence, remaining_ms, state, attempt, details, details_size}]}")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if *limit < 1 {
		return usagef("limit %d: want at least 1", *limit)
	}
	ops, err := openOps(ctx, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	leases, err := scanLeases(ctx, ops.rdb, o.prefix+"lease:", *limit)
	if err != nil {
		return err
	}
	withRecords(ctx, ops.s, leases)
	if *asJSON {
		return writeLeasesJSON(e.Stdout, leases)
	}
	return printLeases(e.Stdout, leases)
}

func printLeases(w io.Writer, leases []leaseInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "KEY\tOWNER\tFENCE\tREMAINING\tSTATE\tATTEMPT\tDETAILS")
	for _, l := range leases {
		state, attempt, details := "-", "-", "-"
		switch {
		case l.RecErr != nil:
			state = "unreadable"
		case l.Record != nil:
			state = l.Record.State.String()
			if l.Record.State != idempotency.Absent {
				attempt = strconv.Itoa(l.Record.Attempt)
			}
			if l.Record.HasDetails {
				details = printable(l.Record.Details, l.Record.DetailsSize, maxListedDetails)
			}
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", l.Name, l.Owner, l.Fence,
			l.Remaining.Round(time.Millisecond), state, attempt, details)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d leases held\n", len(leases))
	return err
}

// scanLeases lists the leases under keyPrefix (SCAN on every master).
func scanLeases(ctx context.Context, rdb redis.UniversalClient, keyPrefix string, limit int) ([]leaseInfo, error) {
	var keys []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, escapeGlob(keyPrefix)+"*", 500).Iterator()
		for it.Next(ctx) && len(keys) < limit {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, err
	}
	out := make([]leaseInfo, 0, len(keys))
	for _, k := range keys {
		li, held, err := readLease(ctx, rdb, k)
		if err != nil {
			return nil, err
		}
		if held {
			li.lease = strings.TrimPrefix(k, keyPrefix)
			li.Name = displayName(li.lease)
			out = append(out, li)
		}
	}
	sort.Slice(out, func(i, j int) bool { return natLess(out[i].Name, out[j].Name) })
	return out, nil
}

// displayName strips the "{tag}:" the idempotency store puts in front of the
// key, and the braces the lease manager adds around untagged names.
func displayName(n string) string {
	if strings.HasPrefix(n, "{") {
		if i := strings.Index(n, "}"); i > 0 {
			rest := n[i+1:]
			if strings.HasPrefix(rest, ":") {
				return rest[1:]
			}
			if rest == "" {
				return n[1:i]
			}
		}
	}
	return n
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

func cmdExpire(ctx context.Context, e *Env, args []string) error {
	k, ops, err := openKeyCommand(ctx, e, "expire", args)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	key := ops.m.Key(ops.s.LeaseName(k))
	li, held, err := readLease(ctx, ops.rdb, key)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("no lease held for key %q", k)
	}
	// PEXPIRE of 1ms: the lease ends as if its holder had stopped renewing;
	// the holder's next renewal finds it gone (lease: expired) and the next
	// claim of the key is a takeover with a higher fence.
	if err := ops.rdb.PExpire(ctx, key, time.Millisecond).Err(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.Stderr, nil))
	log.Warn("lease expired by operator", slog.String("key", k), slog.Uint64("fence", li.Fence),
		slog.String("owner", li.Owner), slog.Duration("remaining_before", li.Remaining))
	_, _ = fmt.Fprintf(e.Stdout, "expired lease of %s (fence %d)\n", k, li.Fence)
	return nil
}

func cmdCapacity(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "capacity", "")
	var o opsFlags
	o.define(f)
	rate := f.Float64("rate", 1000, "messages per second")
	var retention time.Duration
	f.durationVar(&retention, "retention", "LEASEHOLD_RETENTION", leasehold.DefaultRetention, "how long finished keys are kept, as run's --retention")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if *rate <= 0 || retention < time.Second {
		return usagef("want a positive --rate and a --retention of at least 1s")
	}
	ops, err := openOps(ctx, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	// Said before anything is written: the figure comes from the live Redis.
	_, _ = fmt.Fprintf(e.Stderr, "capacity: writing %d sample records under %sidem:capacity:* on the Redis of --redis "+
		"to measure them (deleted afterwards, a 10-minute TTL if interrupted); measure on a quiet server\n",
		idempotency.CapacitySample, o.prefix)
	r, err := ops.s.Capacity(ctx, *rate, retention)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "rate\t%.0f msg/s\n", *rate)
	_, _ = fmt.Fprintf(tw, "retention\t%s\n", retention)
	_, _ = fmt.Fprintf(tw, "bytes per record\t%.1f (measured on %d sample records)\n", r.BytesPerRecord, r.SampleRecords)
	_, _ = fmt.Fprintf(tw, "records per bucket\t%.1f (listpack: %v; min shards %d)\n", r.RecordsPerBucket, r.Listpack, r.MinShards)
	_, _ = fmt.Fprintf(tw, "peak records\t%.0f\n", r.PeakRecords)
	_, _ = fmt.Fprintf(tw, "peak memory\t%.1f MiB (records only; leases and large results apart)\n", r.PeakBytes/(1<<20))
	return tw.Flush()
}

func cmdCompensations(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "compensations", "[retry KEY]")
	var o opsFlags
	o.define(f)
	app := e.application()
	app.defineFlags(f)
	limit := f.Int("limit", 100, "list at most this many, at least 1")
	if err := f.parse(args); err != nil {
		return err
	}
	if *limit < 1 {
		return usagef("limit %d: want at least 1", *limit)
	}
	var retryKey string
	switch {
	case f.NArg() == 0:
	case f.NArg() == 2 && f.Arg(0) == "retry":
		retryKey = f.Arg(1)
		if err := leasehold.ValidateKey(retryKey); err != nil {
			return &usageError{err}
		}
	default:
		return usagef("want no argument (list) or 'retry KEY'")
	}
	ops, err := openOps(ctx, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	reg := compensation.NewRegistry()
	setup := &Setup{Log: slog.New(slog.NewTextHandler(e.Stderr, nil)), Command: "compensations"}
	defer setup.close()
	if err := app.registerCompensations(ctx, reg, setup); err != nil {
		return err
	}
	r, err := compensation.NewRunner(ops.rdb, ops.m, reg, compensation.WithPrefix(o.prefix))
	if err != nil {
		return err
	}
	defer func() { _ = r.Shutdown(context.WithoutCancel(ctx)) }()
	if retryKey != "" {
		n, err := r.Retry(ctx, retryKey)
		if n == 0 && err == nil {
			return fmt.Errorf("no dead-lettered compensation for key %q", retryKey)
		}
		if err != nil {
			return fmt.Errorf("retried %d journals of %q: %w", n, retryKey, err)
		}
		_, _ = fmt.Fprintf(e.Stdout, "compensated %d journals of %s\n", n, retryKey)
		return nil
	}
	dls, err := r.List(ctx, *limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "KEY\tFENCE\tSINCE\tSTEP\tHANDLER\tSTATE\tATTEMPTS\tLAST ERROR")
	for _, d := range dls {
		for _, s := range d.Steps {
			_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", displayName(d.Ref.Name), d.Ref.Fence,
				d.Since.Format(time.RFC3339), s.Name, s.Handler, s.State, s.Attempts, truncate(s.Error, 80))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(e.Stdout, "%d dead-lettered compensations\n", len(dls))
	return nil
}
