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

// Scan reads topic with a client of its own (connOpts: seed brokers, TLS,
// SASL, no group options), every partition of end from its offset in from
// (the log start, listed through adm, for a partition from lacks or for an
// offset below the log start) up to its offset in end, and calls fn with
// each record that is not a control record, until fn returns false or every
// partition was read to its end. It returns an error, with fn's answers so
// far standing, if ctx ends before that.
func Scan(ctx context.Context, adm *kgo.Client, connOpts []kgo.Opt, topic string, from, end map[int32]int64, fn func(*kgo.Record) bool) error {
	start, err := StartOffsets(ctx, adm, topic)
	if err != nil {
		return err
	}
	parts := make(map[int32]kgo.Offset)
	for p, e := range end {
		if s := max(from[p], start[p]); s < e {
			parts[p] = kgo.NewOffset().At(s)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clip(connOpts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		// Control records (transaction markers) occupy offsets too: keep
		// them so that a partition whose last offsets are markers is seen
		// to reach its end.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("deadletter: client to read %s: %w", topic, err)
	}
	defer cl.Close()
	var lastErr error
	for len(parts) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%w (last fetch error: %w)", err, lastErr)
			}
			return fmt.Errorf("deadletter: read %s: %d partitions not read to the end: %w", topic, len(parts), err)
		}
		fs.EachError(func(_ string, _ int32, err error) { lastErr = err })
		more := true
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Partition]
			if !more || !ok || r.Offset >= e {
				return
			}
			if r.Offset == e-1 {
				delete(parts, r.Partition)
			}
			if !r.Attrs.IsControl() {
				more = fn(r)
			}
		})
		if !more {
			return nil
		}
	}
	return nil
}
