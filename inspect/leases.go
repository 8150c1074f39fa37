package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/tracing"
)

// LeasePage is one page of [Inspector.Leases].
type LeasePage struct {
	Leases []Lease // sorted by Name
	Next   string  // the cursor of the next page; "" at the end
}

// maxScanCalls bounds the SCAN calls one page of leases takes (on a keyspace
// of mostly other keys, a page may come back short, with a cursor to go on).
const maxScanCalls = 40

// Leases returns one page of the leases held now, from cursor ("" for the
// first page) on: about limit of them (at least 1; SCAN may give a few
// more, or fewer with a cursor to continue), each idempotency key's lease
// with the key's record. A lease may show up on two pages (SCAN's promise).
func (i *Inspector) Leases(ctx context.Context, cursor string, limit int) (LeasePage, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return LeasePage{}, err
	}
	cur, err := parseCursor(cursor)
	if err != nil {
		return LeasePage{}, err
	}
	ns, err := nodes(ctx, i.rdb)
	if err != nil {
		return LeasePage{}, err
	}
	prefix := i.cfg.prefix + "lease:"
	keys, next, err := scanKeys(ctx, ns, escapeGlob(prefix)+"*", cur, max(limit, 1), maxScanCalls)
	if err != nil {
		return LeasePage{}, err
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	ls, err := i.readLeases(ctx, keys)
	if err != nil {
		return LeasePage{}, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for j := range ls {
		l := &ls[j]
		stored := strings.TrimPrefix(l.LeaseKey, prefix)
		l.Name = DisplayName(stored)
		if be.s.LeaseName(l.Name) != stored {
			continue // another lease (a compensation's, or another library's)
		}
		l.Idempotency = true
		g.Go(func() error {
			info, err := be.s.Lookup(gctx, l.Name)
			l.Record, l.RecordErr = &info, err
			return nil
		})
	}
	_ = g.Wait()
	slices.SortFunc(ls, func(a, b Lease) int { return cmp.Compare(a.Name, b.Name) })
	return LeasePage{Leases: ls, Next: next}, nil
}

// readLeases reads the leases at keys in one pipeline, leaving out keys no
// longer held.
func (i *Inspector) readLeases(ctx context.Context, keys []string) ([]Lease, error) {
	p := i.rdb.Pipeline()
	cs := make([]*lease.PeekCmd, len(keys))
	for j, k := range keys {
		cs[j] = lease.Peek(ctx, p, k)
	}
	if len(keys) > 0 {
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	out := make([]Lease, 0, len(keys))
	for j, k := range keys {
		if h, ok := cs[j].Holder(); ok {
			out = append(out, Lease{LeaseKey: k, Owner: OwnerDigest(h.Token), Fence: h.Fence, Remaining: h.Remaining})
		}
	}
	return out, nil
}

// expireTries bounds how often Expire reads the lease again after it
// changed between the read and the write.
const expireTries = 8

// Expire ends the lease of idempotency key key now, as if its holder had
// stopped renewing: the holder finds it gone at its next renewal (its job is
// cancelled with the lease lost and its saga compensated), its commit is
// refused, and the next claim of the key is a takeover with a higher fence.
// With fence non-zero only the lease of that fence is expired (the one the
// operator saw); another is refused with [ErrLeaseChanged]. No lease:
// [ErrNoLease]. It returns the lease expired. It needs no transaction
// (WATCH, MULTI), which the least-privilege ACL does not grant: a script
// expires the lease only while it holds the value read.
func (i *Inspector) Expire(ctx context.Context, key string, fence uint64) (Lease, error) {
	lk, err := i.LeaseKey(ctx, key)
	if err != nil {
		return Lease{}, err
	}
	ctx, sp := i.startSpan(ctx, "expire", key)
	var seen Lease
	done := false
	for range expireTries {
		if seen, done, err = i.expireRead(ctx, key, lk, fence); err != nil || done {
			break
		}
	}
	if err == nil && !done {
		err = fmt.Errorf("%w (while expiring it)", ErrLeaseChanged)
	}
	i.endSpan(sp, seen.Fence, "expired", err) //nolint:contextcheck // ending a span needs no context
	if err != nil {
		return Lease{}, err
	}
	i.cfg.logger.Warn("lease expired by operator", slog.String("key", key), slog.Uint64("fence", seen.Fence),
		slog.String("owner", seen.Owner), slog.Duration("remaining_before", seen.Remaining))
	return seen, nil
}

// expireRead reads the lease at lk and expires it, unless the key's value
// changed since the read (done false: read it again). The holder's renewals
// keep the value; a takeover, a release or a cancel request changes it (the
// fence check then sees the new lease).
func (i *Inspector) expireRead(ctx context.Context, key, lk string, fence uint64) (seen Lease, done bool, err error) {
	p := i.rdb.Pipeline()
	c := lease.Peek(ctx, p, lk)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Lease{}, false, err
	}
	h, ok := c.Holder()
	switch {
	case !ok:
		return Lease{}, false, ErrNoLease
	case fence != 0 && h.Fence != fence:
		return Lease{}, false, fmt.Errorf("%w (fence %d, not %d)", ErrLeaseChanged, h.Fence, fence)
	}
	seen = Lease{Name: key, LeaseKey: lk, Owner: OwnerDigest(h.Token), Fence: h.Fence, Remaining: h.Remaining, Idempotency: true}
	n, err := scripts.LeaseExpire.Run(ctx, i.rdb, []string{lk}, c.Value()).Int64()
	if err != nil {
		return Lease{}, false, err
	}
	return seen, n == scripts.LeaseOK, nil
}

func (i *Inspector) startSpan(ctx context.Context, name, key string) (context.Context, *tracing.Span) {
	if i.cfg.tracer == nil {
		return ctx, nil
	}
	return i.cfg.tracer.StartOperator(ctx, name, key)
}

// endSpan ends sp (nil: none) with outcome, or "refused" for a refusal the
// caller can act on, or an error.
func (i *Inspector) endSpan(sp *tracing.Span, fence uint64, outcome string, err error) {
	if sp == nil {
		return
	}
	if fence != 0 {
		sp.SetFence(fence)
	}
	switch {
	case err == nil:
		sp.End(outcome, nil)
	case errors.Is(err, ErrNoLease), errors.Is(err, ErrLeaseChanged), errors.Is(err, ErrNothingToRetry), errors.Is(err, ErrNoHandlers),
		errors.Is(err, ErrUnknownKey), errors.Is(err, ErrFinished), errors.Is(err, ErrNotRunning):
		sp.End("refused", err)
	default:
		sp.End(tracing.OutcomeError, err)
	}
}

// DisplayName strips the "{tag}:" the idempotency store puts in front of a
// key's lease name, and the braces the lease manager adds around untagged
// names.
func DisplayName(n string) string {
	if strings.HasPrefix(n, "{") {
		if j := strings.Index(n, "}"); j > 0 {
			rest := n[j+1:]
			if strings.HasPrefix(rest, ":") {
				return rest[1:]
			}
			if rest == "" {
				return n[1:j]
			}
		}
	}
	return n
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// nodes returns the Redis nodes to scan, in a stable order: the masters of a
// Cluster sorted by address, or the client itself.
func nodes(ctx context.Context, rdb redis.UniversalClient) ([]redis.Cmdable, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return []redis.Cmdable{rdb}, nil
	}
	var (
		mu sync.Mutex
		ns []*redis.Client
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		ns = append(ns, n)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ns, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	out := make([]redis.Cmdable, len(ns))
	for j, n := range ns {
		out[j] = n
	}
	return out, nil
}

// scanCursor is a position in a scan over every node: "node.cursor"; "" is
// the start.
type scanCursor struct {
	node int
	pos  uint64
}

func parseCursor(s string) (scanCursor, error) {
	if s == "" {
		return scanCursor{}, nil
	}
	n, p, ok := strings.Cut(s, ".")
	node, err1 := strconv.Atoi(n)
	pos, err2 := strconv.ParseUint(p, 10, 64)
	if !ok || err1 != nil || err2 != nil || node < 0 {
		return scanCursor{}, fmt.Errorf("%w %q", ErrBadCursor, s)
	}
	return scanCursor{node, pos}, nil
}

func (c scanCursor) String() string {
	return strconv.Itoa(c.node) + "." + strconv.FormatUint(c.pos, 10)
}

// scanKeys returns keys matching pattern from cursor c on, at least want of
// them unless the scan ends or takes maxCalls SCAN calls (of COUNT want),
// and the cursor to continue from ("" at the end). Every key a SCAN call
// returned is kept, as a cursor cannot point inside a call's answer.
func scanKeys(ctx context.Context, ns []redis.Cmdable, pattern string, c scanCursor, want, maxCalls int) ([]string, string, error) {
	count := int64(max(want, 10))
	var keys []string
	for calls := 0; c.node < len(ns); {
		if len(keys) >= want || calls >= maxCalls {
			return keys, c.String(), nil
		}
		ks, next, err := ns[c.node].Scan(ctx, c.pos, pattern, count).Result()
		if err != nil {
			return nil, "", err
		}
		calls++
		keys = append(keys, ks...)
		c.pos = next
		if next == 0 {
			c.node++
		}
	}
	return keys, "", nil
}

// scanCount is the COUNT of the SCAN calls that count leases.
const scanCount = 1000

// CountLeases counts the leases held on every node, looking at about budget
// keys at most (at least one SCAN call of 1000); partial reports that it
// stopped before the end, so that n is a lower bound.
func (i *Inspector) CountLeases(ctx context.Context, budget int) (n int64, partial bool, err error) {
	ns, err := nodes(ctx, i.rdb)
	if err != nil {
		return 0, false, err
	}
	pattern := escapeGlob(i.cfg.prefix+"lease:") + "*"
	maxCalls := max(1, budget/scanCount)
	seen := make(map[string]struct{})
	calls := 0
	for _, nd := range ns {
		var pos uint64
		for {
			if calls >= maxCalls {
				return int64(len(seen)), true, nil
			}
			ks, next, err := nd.Scan(ctx, pos, pattern, scanCount).Result()
			if err != nil {
				return 0, false, err
			}
			calls++
			for _, k := range ks {
				seen[k] = struct{}{}
			}
			if pos = next; pos == 0 {
				break
			}
		}
	}
	return int64(len(seen)), false, nil
}
