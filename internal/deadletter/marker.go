package deadletter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// Marker values. Markers written before the produce window existed hold
// "pending:<offsets>" (no window: the scan starts at once) or "1" (done).
const (
	markerDone    = "1"
	markerPending = "pending:"
)

// markerState is what a marker says.
type markerState uint8

const (
	absent  markerState = iota // no attempt recorded (or expired)
	pending                    // an attempt began; its copy may exist
	done                       // the copy exists
)

// marker is a marker as read: its state and, when pending, the offsets
// recorded with it (nil if unreadable: scan from the log start) and how
// long its produce window stays open (zero when closed).
type marker struct {
	state markerState
	from  map[int32]int64
	open  time.Duration
}

// copyID names the dead-letter copy in topic of r, read from a topic of
// origin o: the marker key's suffix and the lock's lease name. The hash tag
// keeps the marker and the lock's lease key in one Cluster slot, for the
// fenced stamp script (Kafka topic names, cluster IDs and base64 URL topic
// IDs have no braces).
func copyID(topic string, o origin, r *kgo.Record) string {
	return "dlq:{" + topic + ":" + o.cluster + ":" + o.topicIDString() + ":" + r.Topic + ":" +
		strconv.FormatInt(int64(r.Partition), 10) + ":" + strconv.FormatInt(r.Offset, 10) + "}"
}

// readMarker reads the marker at key, with the Redis clock (TIME in the
// same round trip) for its produce window.
func readMarker(ctx context.Context, rdb redis.UniversalClient, key string) (marker, error) {
	var get *redis.StringCmd
	var now *redis.TimeCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return marker{}, fmt.Errorf("deadletter: read marker: %w", err)
	}
	v, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return marker{state: absent}, nil
	case err != nil:
		return marker{}, fmt.Errorf("deadletter: read marker: %w", err)
	}
	rest, isPending := strings.CutPrefix(v, markerPending)
	if !isPending {
		return marker{state: done}, nil
	}
	var open time.Duration
	if closes, offs, ok := strings.Cut(rest, ";"); ok {
		rest = offs
		ms, perr := strconv.ParseInt(closes, 10, 64)
		t, terr := now.Result()
		if perr != nil || terr != nil {
			// A damaged window, or no clock: wait a whole window.
			open = produceWindow
		} else {
			open = max(time.UnixMilli(ms).Sub(t), 0)
		}
	}
	return marker{state: pending, from: parseOffsets(rest), open: open}, nil
}

// stamp opens a produce window of length window on the marker at key,
// fenced by the lock l taken from locks (lua/dlq_stamp.lua), recording from
// as the offsets a later scan starts at unless an earlier attempt recorded
// its own. isDone reports that the marker already says the copy exists. A
// lost lock is an error wrapping lease.ErrLost.
func stamp(ctx context.Context, locks Locks, l *lease.Lease, key string, from map[int32]int64, window, retention time.Duration) (isDone bool, err error) {
	res, err := locks.Fenced(ctx, l, scripts.DLQStamp, []string{key}, formatOffsets(from),
		window.Milliseconds(), retention.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("deadletter: stamp marker: %w", err)
	}
	switch code, _ := res.(int64); code {
	case scripts.DLQStamped:
		return false, nil
	case scripts.DLQDone:
		return true, nil
	default:
		return false, fmt.Errorf("deadletter: stamp marker: %w %v", errStampStatus, res)
	}
}

// formatOffsets encodes offsets as "partition=offset" pairs joined by
// commas, in partition order.
func formatOffsets(offs map[int32]int64) string {
	var b strings.Builder
	for i, p := range slices.Sorted(maps.Keys(offs)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(p), 10))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(offs[p], 10))
	}
	return b.String()
}

// parseOffsets decodes formatOffsets; it returns nil for a malformed value,
// which makes the scan start at the log start: slower, still right.
func parseOffsets(s string) map[int32]int64 {
	out := make(map[int32]int64)
	if s == "" {
		return out
	}
	for pair := range strings.SplitSeq(s, ",") {
		ps, os, ok := strings.Cut(pair, "=")
		p, perr := strconv.ParseInt(ps, 10, 32)
		o, oerr := strconv.ParseInt(os, 10, 64)
		if !ok || perr != nil || oerr != nil {
			return nil
		}
		out[int32(p)] = o //nolint:gosec // ParseInt with bitSize 32 keeps p in range
	}
	return out
}
