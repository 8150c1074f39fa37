package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StartOffsets lists topic's log start offsets by partition. A topic that
// does not exist yet lists no partition.
func StartOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	return listOffsets(ctx, cl, topic, false)
}

// EndOffsets lists topic's end offsets (the next offset to be written) by
// partition. A topic that does not exist yet lists no partition: nothing was
// written to it.
func EndOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	return listOffsets(ctx, cl, topic, true)
}

func listOffsets(ctx context.Context, cl *kgo.Client, topic string, end bool) (map[int32]int64, error) {
	adm := kadm.NewClient(cl) // not closed: that would close cl
	list := adm.ListStartOffsets
	if end {
		list = adm.ListEndOffsets
	}
	listed, err := list(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("deadletter: list offsets of %s: %w", topic, err)
	}
	out := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case o.Err == nil:
			out[o.Partition] = o.Offset
		case o.Partition == -1 && errors.Is(o.Err, kerr.UnknownTopicOrPartition):
		default:
			err = cmp.Or(err, fmt.Errorf("deadletter: list offsets of %s[%d]: %w", topic, o.Partition, o.Err))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Reader reads one topic partition by partition over one client of its
// own, which also serves the caller's metadata and offset requests
// (Client): a caller that reads several partitions in turn (a page of the
// dead-letter topic, partition after partition, until the page is full)
// opens one connection set, not one a partition. A Reader is not safe for
// concurrent use.
type Reader struct {
	cl    *kgo.Client
	topic string
	prev  []int32         // the partitions the last Scan consumed
	start map[int32]int64 // the log start offsets, listed at the first Scan
}

// NewReader opens a Reader of topic. connOpts are the client's connection
// options (seed brokers, TLS, SASL, no group options); they may add others
// (fetch sizes, a partitioner for a caller that also produces with
// Client).
func NewReader(connOpts []kgo.Opt, topic string) (*Reader, error) {
	cl, err := kgo.NewClient(append(slices.Clip(connOpts),
		// A direct consumer of no partition yet: each Scan adds its own.
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		// Control records (transaction markers) occupy offsets too: keep
		// them so that a partition whose last offsets are markers is seen
		// to reach its end.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, fmt.Errorf("deadletter: client to read %s: %w", topic, err)
	}
	return &Reader{cl: cl, topic: topic}, nil
}

// Client returns the Reader's client, for requests of the caller's own
// (kadm, produce); the Reader closes it.
func (r *Reader) Client() *kgo.Client { return r.cl }

// Close closes the Reader's client.
func (r *Reader) Close() { r.cl.Close() }

// Scan reads topic with a client of its own (connOpts: see NewReader): see
// Reader.Scan. The adm client lists the log start offsets.
func Scan(ctx context.Context, adm *kgo.Client, connOpts []kgo.Opt, topic string, from, end map[int32]int64, fn func(*kgo.Record) bool) error {
	start, err := StartOffsets(ctx, adm, topic)
	if err != nil {
		return err
	}
	todo := false
	for p, e := range end {
		todo = todo || max(from[p], start[p]) < e
	}
	if !todo {
		return nil // nothing to read: no client opened
	}
	r, err := NewReader(connOpts, topic)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.scan(ctx, start, from, end, fn)
}

// Scan reads every partition of end from its offset in from (the log
// start for a partition from lacks or for an offset below the log start)
// up to its offset in end, and calls fn with each record that is not a
// control record, until fn returns false or every partition was read to its
// end. It returns an error, with fn's answers so far standing, if ctx ends
// before that. The log start offsets are listed once, at the Reader's first
// Scan: a start that has moved on since is an offset out of range to the
// client, which then reads from the new start (ConsumeResetOffset).
func (r *Reader) Scan(ctx context.Context, from, end map[int32]int64, fn func(*kgo.Record) bool) error {
	if r.start == nil {
		start, err := StartOffsets(ctx, r.cl, r.topic)
		if err != nil {
			return err
		}
		r.start = start
	}
	return r.scan(ctx, r.start, from, end, fn)
}

// scan is Scan with the log start offsets listed.
func (r *Reader) scan(ctx context.Context, start, from, end map[int32]int64, fn func(*kgo.Record) bool) error {
	topic := r.topic
	parts := make(map[int32]kgo.Offset)
	low := make(map[int32]int64)
	for p, e := range end {
		if s := max(from[p], start[p]); s < e {
			parts[p], low[p] = kgo.NewOffset().At(s), s
		}
	}
	if len(r.prev) > 0 {
		// The last Scan's partitions stop being fetched; what was buffered
		// for them is dropped, and a stray record is skipped below (low).
		r.cl.RemoveConsumePartitions(map[string][]int32{topic: r.prev})
		r.prev = nil
	}
	if len(parts) == 0 {
		return nil
	}
	for p := range parts {
		r.prev = append(r.prev, p)
	}
	r.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})
	var lastErr error
	for len(parts) > 0 {
		fs := r.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%w (last fetch error: %w)", err, lastErr)
			}
			return fmt.Errorf("deadletter: read %s: %d partitions not read to the end: %w", topic, len(parts), err)
		}
		fs.EachError(func(_ string, _ int32, err error) { lastErr = err })
		more := true
		fs.EachRecord(func(rec *kgo.Record) {
			e, ok := end[rec.Partition]
			if !more || !ok || rec.Offset >= e || rec.Offset < low[rec.Partition] {
				return
			}
			if rec.Offset == e-1 {
				delete(parts, rec.Partition)
			}
			if !rec.Attrs.IsControl() {
				more = fn(rec)
			}
		})
		if !more {
			return nil
		}
	}
	return nil
}
