package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
)

// scanCount is the COUNT of every SCAN the console sends: how many keys
// one call looks at, bounding the work Redis does per call.
const scanCount = 1000

// maxScanCalls bounds the SCAN calls one page of leases may take (on a
// keyspace of mostly other keys, a page may come back short, with a cursor
// to continue).
const maxScanCalls = 40

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
	for i, n := range ns {
		out[i] = n
	}
	return out, nil
}

// cursor is a position in a scan over every node: "node.cursor"; "" is the
// start.
type cursor struct {
	node int
	pos  uint64
}

func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	n, p, ok := strings.Cut(s, ".")
	node, err1 := strconv.Atoi(n)
	pos, err2 := strconv.ParseUint(p, 10, 64)
	if !ok || err1 != nil || err2 != nil || node < 0 {
		return cursor{}, fmt.Errorf("bad cursor %q", s)
	}
	return cursor{node, pos}, nil
}

func (c cursor) String() string { return strconv.Itoa(c.node) + "." + strconv.FormatUint(c.pos, 10) }

// scanKeys returns keys matching pattern from cursor c on, at least want of
// them unless the scan ends or takes maxCalls SCAN calls (of COUNT want:
// each looks at about want keys), and the cursor to continue from ("" at the
// end). A page may hold more than want keys: every key a SCAN call returned
// is kept, as a cursor cannot point inside a call's answer. SCAN may return
// a key twice; the caller drops repeats within a page.
func scanKeys(ctx context.Context, ns []redis.Cmdable, pattern string, c cursor, want, maxCalls int) ([]string, string, error) {
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

// countKeys counts the keys matching pattern on every node, looking at about
// budget keys at most; it reports whether it stopped before the end.
func countKeys(ctx context.Context, ns []redis.Cmdable, pattern string, budget int) (n int64, partial bool, err error) {
	calls := max(1, budget/scanCount)
	seen := make(map[string]struct{})
	_, rest, err := scanEach(ctx, ns, pattern, calls, func(k string) { seen[k] = struct{}{} })
	return int64(len(seen)), rest, err
}

func scanEach(ctx context.Context, ns []redis.Cmdable, pattern string, maxCalls int, fn func(string)) (int, bool, error) {
	calls := 0
	for _, n := range ns {
		var pos uint64
		for {
			if calls >= maxCalls {
				return calls, true, nil
			}
			ks, next, err := n.Scan(ctx, pos, pattern, scanCount).Result()
			if err != nil {
				return calls, false, err
			}
			calls++
			for _, k := range ks {
				fn(k)
			}
			if pos = next; pos == 0 {
				break
			}
		}
	}
	return calls, false, nil
}

// leaseRow is one lease as the running-jobs view shows it.
type leaseRow struct {
	Key         string `json:"key"`   // the idempotency key, or the lease name
	Idempotency bool   `json:"idem"`  // the lease is an idempotency key's (a job's)
	Owner       string `json:"owner"` // digest of the owner token
	Fence       uint64 `json:"fence,string"`
	RemainingMS int64  `json:"remaining_ms"`
	State       string `json:"state,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	Details     string `json:"details,omitempty"` // the last heartbeat details, cut to maxDetails
	DetailsSize int    `json:"details_size,omitempty"`
	DetailsAge  int64  `json:"details_kept_ms,omitempty"`
	Type        string `json:"type,omitempty"`       // the job type (only known in a worker process)
	ElapsedMS   int64  `json:"elapsed_ms,omitempty"` // since the attempt's claim
	ElapsedFrom string `json:"elapsed_from,omitempty"`
	TraceURL    string `json:"trace_url,omitempty"`
	Error       string `json:"error,omitempty"`
}

// maxDetails bounds the heartbeat details a page receives, in bytes.
const maxDetails = 512

// readLeases reads the leases at keys (HMGET tok fen and PTTL, one
// pipeline), leaving out keys no longer held.
func readLeases(ctx context.Context, rdb redis.UniversalClient, leasePrefix string, keys []string) ([]leaseRow, error) {
	p := rdb.Pipeline()
	hs := make([]*redis.SliceCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		hs[i] = p.HMGet(ctx, k, "tok", "fen")
		ttls[i] = p.PTTL(ctx, k)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]leaseRow, 0, len(keys))
	for i, k := range keys {
		v := hs[i].Val()
		if len(v) < 2 {
			continue
		}
		tok, _ := v[0].(string)
		if tok == "" {
			continue
		}
		fs, _ := v[1].(string)
		fen, _ := strconv.ParseUint(fs, 10, 64)
		out = append(out, leaseRow{Key: strings.TrimPrefix(k, leasePrefix), Owner: leasehold.OwnerDigest(tok), Fence: fen,
			RemainingMS: max(ttls[i].Val().Milliseconds(), 0)})
	}
	return out, nil
}

// displayName strips the "{tag}:" the idempotency store puts in front of a
// key's lease name.
func displayName(n string) string {
	if strings.HasPrefix(n, "{") {
		if i := strings.Index(n, "}"); i > 0 && strings.HasPrefix(n[i+1:], ":") {
			return n[i+2:]
		}
	}
	return n
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}
