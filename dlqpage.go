package leasehold

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/deadletter"
)

// deadLetterSource is the Kafka side of the worker's Inspector: pages of
// its dead-letter topic ([inspect.WithDeadLetters]).
type deadLetterSource struct{ w *Worker }

// DeadLetterPage reads the records of the dead-letter topic matching q from
// q's cursor on, partition by partition in order, up to the end offsets
// listed when the call begins; it reads one matching record past the page
// to name the next page's cursor exactly. With q.MaxScan or q.MaxScanBytes
// it stops at the record that reaches either, and the next page's cursor
// is the offset after it; its fetches are then sized to the byte bound.
func (s deadLetterSource) DeadLetterPage(ctx context.Context, q inspect.DeadLetterQuery) (inspect.DeadLetterPage, error) {
	w := s.w
	page := inspect.DeadLetterPage{Topic: w.cfg.dlqTopic, Records: []inspect.DeadLetter{}}
	cp, co, err := inspect.ParseDeadLetterCursor(q.Cursor)
	if err != nil {
		return page, err
	}
	// One client a page: it lists the topic's offsets and reads its
	// partitions in turn.
	rd, err := deadletter.NewReader(w.scanOpts(q), w.cfg.dlqTopic)
	if err != nil {
		return page, fmt.Errorf("leasehold: kafka client: %w", err)
	}
	defer rd.Close()
	id, end, err := w.deadLetterEnds(ctx, rd.Client())
	if err != nil {
		return page, err
	}
	got, err := w.scanDeadLetters(ctx, rd, q, cp, co, end, &page)
	if err != nil {
		return page, err
	}
	if len(got) > q.Limit {
		page.Next = inspect.DeadLetterCursor(got[q.Limit].Partition, got[q.Limit].Offset)
		got = got[:q.Limit]
	}
	if err := w.readReplayMarkers(ctx, id, got); err != nil {
		return page, err
	}
	for _, d := range got {
		page.Records = append(page.Records, inspect.DeadLetter{Partition: d.Partition, Offset: d.Offset, Time: d.Time.UTC(),
			Reason: d.Reason, Error: d.Error, Key: d.Key, Type: d.Type, OrigTopic: d.OrigTopic, OrigPartition: d.OrigPartition,
			OrigOffset: d.OrigOffset, Truncated: d.Truncated, Replay: d.Replay})
	}
	return page, nil
}

// scanOpts are the options of the client that reads a page of q: the
// connection's, with fetches sized to q's byte bound when it has one.
func (w *Worker) scanOpts(q inspect.DeadLetterQuery) []kgo.Opt {
	opts := w.connOpts()
	if q.MaxScanBytes > 0 {
		// A fetch brings at least one batch whatever these say, and at most
		// this much more than the bound.
		part := int32(min(q.MaxScanBytes, 1<<20))
		opts = append(opts, kgo.FetchMaxBytes(part), kgo.FetchMaxPartitionBytes(part))
	}
	return opts
}

// scanDeadLetters reads the dead-letter topic for one page of q from
// partition cp at offset co on, up to end, with rd: the matching records,
// up to one past q.Limit, or fewer when q's scan bounds stop the read,
// which sets page's Next (the offset after the last record read), Cut and
// Scanned.
func (w *Worker) scanDeadLetters(ctx context.Context, rd *deadletter.Reader, q inspect.DeadLetterQuery, cp int32, co int64,
	end map[int32]int64, page *inspect.DeadLetterPage) ([]DeadLetter, error) {
	f := DeadLetterFilter{Reason: q.Reason, Type: q.Type, Key: q.Key}
	var (
		got       []DeadLetter
		bytesRead int64
		cutAt     *kgo.Record // the last record read, when a scan bound stopped the read
	)
	parts := slices.Sorted(maps.Keys(end))
	for i, p := range parts {
		if p < cp || len(got) > q.Limit || cutAt != nil {
			continue
		}
		from := map[int32]int64{p: 0}
		if p == cp {
			from[p] = co
		}
		err := rd.Scan(ctx, from, map[int32]int64{p: end[p]}, func(r *kgo.Record) bool {
			page.Scanned++
			bytesRead += recordSize(r)
			if d := parseDeadLetter(r); f.match(&d) {
				got = append(got, d)
			}
			if len(got) > q.Limit {
				return false
			}
			if q.MaxScan > 0 && page.Scanned >= q.MaxScan || q.MaxScanBytes > 0 && bytesRead >= q.MaxScanBytes {
				cutAt = r
				return false
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		if cutAt != nil && len(got) <= q.Limit {
			switch {
			case cutAt.Offset+1 < end[p]:
				page.Next, page.Cut = inspect.DeadLetterCursor(p, cutAt.Offset+1), true
			case i+1 < len(parts):
				page.Next, page.Cut = inspect.DeadLetterCursor(parts[i+1], 0), true
			}
		}
	}
	return got, nil
}

// deadLetterEnds returns the dead-letter topic's ID (which names the replay
// markers) and its partitions' end offsets.
func (w *Worker) deadLetterEnds(ctx context.Context, cl *kgo.Client) (string, map[int32]int64, error) {
	topic := w.cfg.dlqTopic
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return "", nil, fmt.Errorf("leasehold: read the metadata of %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return "", nil, fmt.Errorf("%w: dead-letter topic %s", ErrTopicMissing, topic)
	}
	end, err := deadletter.EndOffsets(ctx, cl, topic)
	if err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(d.ID[:]), end, nil
}

// DeadLetterSource returns what reads pages of the worker's dead-letter
// topic with its Kafka options, for an Inspector built apart
// ([inspect.WithDeadLetters]); [Worker.Inspector] has it already. It works
// before [Worker.Start].
func (w *Worker) DeadLetterSource() inspect.DeadLetterSource { return deadLetterSource{w} }
