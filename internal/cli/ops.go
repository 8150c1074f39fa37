package cli

import (
	"cmp"
	"context"
	"encoding/json"
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
	"github.com/leasehold/leasehold/inspect"
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

// opsStore is an Inspector over the Redis of the ops flags, built with
// the store options the workers use, to name and read keys as they do.
type opsStore struct {
	rdb redis.UniversalClient
	in  *inspect.Inspector
}

func openOps(ctx context.Context, e *Env, o opsFlags, extra ...inspect.Opt) (*opsStore, error) {
	policy, err := policyOpts(*o.policy)
	if err != nil {
		return nil, err
	}
	rdb, err := openRedis(ctx, o.redisURL)
	if err != nil {
		return nil, err
	}
	in := inspect.New(rdb, append([]inspect.Opt{inspect.WithPrefix(o.prefix), inspect.WithLogger(slog.New(slog.NewTextHandler(e.Stderr, nil))),
		inspect.WithStoreOptions(append(policy, idempotency.WithMaxKeyLen(leasehold.MaxKeyLen))...)}, extra...)...)
	// Build the store now, so that a policy or layout mismatch is said first.
	if _, err := in.Store(ctx); err != nil {
		_ = in.Close(ctx)
		_ = rdb.Close()
		return nil, policyHint(err)
	}
	return &opsStore{rdb: rdb, in: in}, nil
}

func (o *opsStore) close(ctx context.Context) {
	_ = o.in.Close(context.WithoutCancel(ctx))
	_ = o.rdb.Close()
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
	ops, err := openOps(ctx, e, o)
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
	ki, err := ops.in.Key(ctx, k)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.Stdout, newInspectJSON(ki))
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "key\t%s\n", k)
	_, _ = fmt.Fprintf(tw, "cluster tag\t%s\n", ki.Tag)
	_, _ = fmt.Fprintf(tw, "lease key\t%s\n", ki.LeaseKey)
	if ki.Leased {
		_, _ = fmt.Fprintf(tw, "lease\theld\n")
		_, _ = fmt.Fprintf(tw, "owner\t%s (token digest)\n", ki.Owner)
		_, _ = fmt.Fprintf(tw, "fence\t%d\n", ki.LeaseFence)
		_, _ = fmt.Fprintf(tw, "remaining\t%s\n", ki.Remaining.Round(time.Millisecond))
	} else {
		_, _ = fmt.Fprintf(tw, "lease\tnone (free, finished, or never seen)\n")
	}
	printRecord(tw, ki)
	return tw.Flush()
}

func printRecord(tw io.Writer, ki inspect.KeyInfo) {
	_, _ = fmt.Fprintf(tw, "record\t%s\n", ki.State)
	if ki.Type != "" {
		_, _ = fmt.Fprintf(tw, "type\t%s (from its history)\n", ki.Type)
	}
	if ki.State != idempotency.Absent {
		_, _ = fmt.Fprintf(tw, "record fence\t%d\n", ki.Fence)
		_, _ = fmt.Fprintf(tw, "attempt\t%d\n", ki.Attempt)
	}
	switch ki.State {
	case idempotency.Completed:
		_, _ = fmt.Fprintf(tw, "finished at\t%s\n", ki.FinishedAt.UTC().Format(time.RFC3339))
		_, _ = fmt.Fprintf(tw, "result\t%d bytes\n", ki.ResultSize)
	case idempotency.Failed:
		_, _ = fmt.Fprintf(tw, "finished at\t%s\n", ki.FinishedAt.UTC().Format(time.RFC3339))
		_, _ = fmt.Fprintf(tw, "error\t%s\n", printable([]byte(ki.Failure), len(ki.Failure), maxShownError))
	case idempotency.Released:
		if !ki.HoldUntil.IsZero() {
			_, _ = fmt.Fprintf(tw, "held until\t%s\n", ki.HoldUntil.UTC().Format(time.RFC3339Nano))
		}
	}
	if ki.HasDetails {
		_, _ = fmt.Fprintf(tw, "heartbeat details\t%s\n", printable(ki.Details, ki.DetailsSize, maxShownDetails))
		_, _ = fmt.Fprintf(tw, "details kept for\t%s\n", ki.DetailsTTL.Round(time.Second))
	} else {
		_, _ = fmt.Fprintf(tw, "heartbeat details\tnone\n")
	}
}

// maxShownDetails bounds the heartbeat details inspect prints, in bytes;
// leases prints at most maxListedDetails; maxShownError bounds a failed
// record's error text.
const (
	maxShownDetails  = 512
	maxListedDetails = 40
	maxShownError    = 1024
)

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
	ops, err := openOps(ctx, e, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	leases, err := listLeases(ctx, ops.in, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeLeasesJSON(e.Stdout, leases)
	}
	return printLeases(e.Stdout, leases)
}

func printLeases(w io.Writer, leases []inspect.Lease) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "KEY\tOWNER\tFENCE\tREMAINING\tSTATE\tATTEMPT\tDETAILS")
	for _, l := range leases {
		state, attempt, details := "-", "-", "-"
		switch {
		case l.RecordErr != nil:
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

// listLeases reads the Inspector's pages of leases until limit of them,
// in natural order of their names.
func listLeases(ctx context.Context, in *inspect.Inspector, limit int) ([]inspect.Lease, error) {
	var out []inspect.Lease
	seen := make(map[string]bool)
	cur := ""
	for len(out) < limit {
		p, err := in.Leases(ctx, cur, min(limit-len(out), 500))
		if err != nil {
			return nil, err
		}
		for _, l := range p.Leases {
			if !seen[l.LeaseKey] && len(out) < limit {
				seen[l.LeaseKey] = true
				out = append(out, l)
			}
		}
		if cur = p.Next; cur == "" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return natLess(out[i].Name, out[j].Name) })
	return out, nil
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

func cmdExpire(ctx context.Context, e *Env, args []string) error {
	var fence uint64
	k, ops, err := openKeyCommand(ctx, e, "expire", args, func(f *flags) {
		f.Uint64Var(&fence, "fence", 0, "expire only the lease of this fence (the one inspect showed); 0: whichever is held")
	})
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	l, err := ops.in.Expire(ctx, k, fence)
	switch {
	case errors.Is(err, inspect.ErrNoLease):
		return fmt.Errorf("no lease held for key %q", k)
	case errors.Is(err, inspect.ErrLeaseChanged):
		return fmt.Errorf("the lease of %q is not the one of fence %d: run inspect again", k, fence)
	case err != nil:
		return err
	}
	_, _ = fmt.Fprintf(e.Stdout, "expired lease of %s (fence %d)\n", k, l.Fence)
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
	ops, err := openOps(ctx, e, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	// Said before anything is written: the figure comes from the live Redis.
	_, _ = fmt.Fprintf(e.Stderr, "capacity: writing %d sample records under %sidem:capacity:* on the Redis of --redis "+
		"to measure them (deleted afterwards, a 10-minute TTL if interrupted); measure on a quiet server\n",
		idempotency.CapacitySample, o.prefix)
	s, err := ops.in.Store(ctx)
	if err != nil {
		return err
	}
	r, err := s.Capacity(ctx, *rate, retention)
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
	_, _ = fmt.Fprintf(tw, "bucket expiry\t%s\n", bucketExpiry(r))
	return tw.Flush()
}

// bucketExpiry says what a record bucket's expiry costs the server, from r.
func bucketExpiry(r idempotency.CapacityReport) string {
	lazy := cmp.Or(r.LazyfreeExpire, "unknown (CONFIG GET refused)")
	if r.FreeMicrosPerRecord == 0 {
		return "not measured (DEL frees in the background, or CONFIG GET or INFO is refused); lazyfree-lazy-expire " + lazy
	}
	cost := fmt.Sprintf("%s a bucket, freed in one step (%.3f µs a record, measured)", r.BucketFree.Round(time.Microsecond),
		r.FreeMicrosPerRecord)
	if r.LazyfreeExpire == "yes" {
		return cost + "; lazyfree-lazy-expire yes: freed in the background, nothing blocked"
	}
	return cost + "; lazyfree-lazy-expire " + lazy + ": Redis is blocked that long as each bucket expires " +
		"(set lazyfree-lazy-expire yes, or raise run's --shards on a fresh keyspace)"
}

func cmdCompensations(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "compensations", "[retry KEY]")
	var o opsFlags
	o.define(f)
	app := e.application()
	app.defineFlags(f)
	limit := f.Int("limit", 100, "list at most this many, at least 1 (at most 1000)")
	asJSON := f.Bool("json", false, "list: print JSON, one journal a line (the console's field names)")
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
	reg := compensation.NewRegistry()
	setup := &Setup{Log: slog.New(slog.NewTextHandler(e.Stderr, nil)), Command: "compensations"}
	defer setup.close()
	if err := app.registerCompensations(ctx, reg, setup); err != nil {
		return err
	}
	ops, err := openOps(ctx, e, o, inspect.WithCompensations(reg))
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	if retryKey != "" {
		n, err := ops.in.RetryCompensation(ctx, retryKey)
		if errors.Is(err, inspect.ErrNothingToRetry) {
			return fmt.Errorf("no dead-lettered compensation for key %q", retryKey)
		}
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(e.Stdout, "compensated %d journals of %s\n", n, retryKey)
		return nil
	}
	dls, err := ops.in.Compensations(ctx, min(*limit, inspect.MaxCompensationPage))
	if err != nil {
		return err
	}
	return printCompensations(e.Stdout, dls, *asJSON)
}

// printCompensations prints the Inspector's dead-lettered and pending journals: a table
// of their steps, or JSON (one journal a line, the console's field names).
func printCompensations(w io.Writer, dls []inspect.Journal, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, d := range dls {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "KEY\tFENCE\tSTATUS\tSINCE\tSTEP\tHANDLER\tSTATE\tATTEMPTS\tLAST ERROR")
	dead := 0
	for _, d := range dls {
		since := d.Created
		if d.Since != nil {
			since, dead = *d.Since, dead+1
		}
		for _, s := range d.Steps {
			_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.Key, d.Fence, d.Status,
				since.Format(time.RFC3339), s.Name, s.Handler, s.State, s.Attempts, truncate(s.Error, 80))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d dead-lettered and %d pending compensations\n", dead, len(dls)-dead)
	return err
}
