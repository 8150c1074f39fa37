package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
)

// Share-group mode (Config.Share): the workers consume through a share
// group (`worker run --share-group`), which has no committed offsets. What a
// consumer group's committed offset says (every record before it is done) a
// share group says with its share-partition start offset (SPSO): every
// record before it is acknowledged (accepted, or archived by the broker) and
// none will be delivered again, and its lag (KIP-1226) counts the records
// from there to the end not acknowledged yet. After the drain, every record
// of the jobs topic must be acknowledged: every partition's lag 0 (see
// ShareGap). A record left unacknowledged (available, or acquired by a
// member) is a record the workers never finished; the run waits for the SPSOs for a while
// (acknowledgements are sent asynchronously) and counts what is left,
// share_records_unacknowledged, a must-be-zero figure. Records the broker
// archived after share.delivery.count.limit deliveries move the SPSO too:
// those are caught by the jobs' outcomes (jobs_lost) and `worker audit`
// (unaccounted), which read Redis and PostgreSQL, not the broker.

// ShareGroup is the share group of the run's workers in share mode: a name
// of the run's own.
func (c *Config) ShareGroup() string { return fmt.Sprintf("leasehold-chaos-share-%d", c.Seed) }

// group is the name of the workers' group: the share group in share mode,
// else the consumer group.
func (c *Config) group() string {
	if c.Share {
		return c.ShareGroup()
	}
	return leasehold.DefaultGroup
}

// ShareGap returns how many records of each partition the share group has
// not acknowledged, and their sum: the partition's lag (lags, the broker's
// count of the records from the start offset to the end that are not
// acknowledged, KIP-1226) where the broker reports one (0 or more), else
// every record between the group's start offset (starts) and the end
// offset (ends). The start offset alone overstates the gap: the broker
// persists it lazily, and a quiet group whose every record is acknowledged
// may show a start offset below the end for good (16 of 18 with lag 0 on
// Apache Kafka 4.4.0). A partition with no start offset counts from 0 (the
// jobs topic's log starts at 0).
func ShareGap(ends, starts, lags map[int32]int64) (total int64, byPartition map[int32]int64) {
	byPartition = map[int32]int64{}
	for p, end := range ends {
		gap := end - starts[p]
		if lag, ok := lags[p]; ok && lag >= 0 {
			gap = lag
		}
		if gap > 0 {
			byPartition[p] = gap
			total += gap
		}
	}
	return total, byPartition
}

// shareOffsets reads the jobs topic's end offsets and the share group's
// start offsets and lags (a lag is -1 where the broker does not report one).
func shareOffsets(ctx context.Context, adm *kadm.Client, group string) (ends, starts, lags map[int32]int64, err error) {
	listed, err := adm.ListEndOffsets(ctx, leasehold.DefaultTopic)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := listed.Error(); err != nil {
		return nil, nil, nil, err
	}
	ends = map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	described, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return nil, nil, nil, err
	}
	d, ok := described[group]
	if !ok {
		return nil, nil, nil, fmt.Errorf("chaos: share group %s not described", group)
	}
	if d.Err != nil {
		return nil, nil, nil, fmt.Errorf("chaos: share group %s: %w", group, d.Err)
	}
	starts, lags = map[int32]int64{}, map[int32]int64{}
	for p, o := range d.Offsets[leasehold.DefaultTopic] {
		if o.Err == nil && o.StartOffset >= 0 {
			starts[p], lags[p] = o.StartOffset, o.Lag
		}
	}
	return ends, starts, lags, nil
}

// waitShareState waits, in share mode, until the share group has a state
// for every partition of the jobs topic (the share coordinator wrote it to
// __share_group_state when the workers joined), so that the fault phase
// does not kill the broker while it creates that internal topic: a broker
// (Apache Kafka 4.4.0) killed within a second of auto-creating it found
// the topic's first partition's log stray at its restart, and a partition
// of the jobs topic then delivered no record again for the rest of the run
// (its start offset stuck at 1, its assigned member polling; see
// docs/kafka.md). The wait ends with an error after wait.
func (r *run) waitShareState(ctx context.Context, wait time.Duration) error {
	if !r.cfg.Share {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokerAddrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(wait)
	group := r.cfg.ShareGroup()
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		described, err := adm.DescribeShareGroupOffsets(rctx, group)
		cancel()
		n := 0
		if d, ok := described[group]; err == nil && ok && d.Err == nil {
			for _, o := range d.Offsets[leasehold.DefaultTopic] {
				if o.Err == nil {
					n++
				}
			}
		}
		if n >= jobPartitions {
			r.log.Info("share group state ready", slog.String("share_group", group), slog.Int("partitions", n))
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = errors.New("the other partitions have none")
			}
			return fmt.Errorf("chaos: share group %s has a state for %d of %d partitions after %s: %w",
				group, n, jobPartitions, wait, err)
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

// shareUnacknowledged waits up to wait for the share group to have
// acknowledged every record of the jobs topic, and returns how many it has
// not by then (share mode only; 0 otherwise). It reads the offsets every
// 250ms; a read that fails is read again until the wait ends.
func (r *run) shareUnacknowledged(ctx context.Context, wait time.Duration) (int64, error) {
	if !r.cfg.Share {
		return 0, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokerAddrs()...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(wait)
	var gap int64 = -1
	var by map[int32]int64
	var lastErr error
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ends, starts, lags, err := shareOffsets(rctx, adm, r.cfg.ShareGroup())
		cancel()
		if err == nil {
			if gap, by = ShareGap(ends, starts, lags); gap == 0 {
				return 0, nil
			}
		}
		lastErr = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
	if gap < 0 {
		return 0, fmt.Errorf("chaos: share group offsets: %w", lastErr)
	}
	parts := make([]string, 0, len(by))
	for p, n := range by {
		parts = append(parts, fmt.Sprintf("%d:%d", p, n))
	}
	slices.Sort(parts)
	r.log.Error("share group: records not acknowledged after the drain", slog.Int64("records", gap),
		slog.String("by_partition", strings.Join(parts, " ")))
	return gap, nil
}

// describeShare writes the share group's start offsets beside the end
// offsets, and its members and their assignments, to b (describeStuck's
// share-mode part).
func describeShare(ctx context.Context, adm *kadm.Client, group string, b *strings.Builder) {
	ends, starts, lags, err := shareOffsets(ctx, adm, group)
	if err != nil {
		fmt.Fprintf(b, "share group offsets: %v\n", err)
	}
	ps := make([]int32, 0, len(ends))
	for p := range ends {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		fmt.Fprintf(b, "partition %s/%d: end=%d share_start=%d share_lag=%d\n", leasehold.DefaultTopic, p, ends[p], starts[p], lags[p])
	}
	groups, err := adm.DescribeShareGroups(ctx, group)
	if err != nil {
		fmt.Fprintf(b, "share group: %v\n", err)
		return
	}
	for _, g := range groups {
		fmt.Fprintf(b, "share group %s: state=%s members=%d\n", g.GroupID, g.GroupState, len(g.Members))
		for _, m := range g.Members {
			var parts []string
			for t, pp := range m.Assignment {
				for p := range pp {
					parts = append(parts, fmt.Sprintf("%s/%d", t, p))
				}
			}
			slices.Sort(parts)
			fmt.Fprintf(b, "  member %s (%s): %s\n", m.MemberID, m.ClientID, strings.Join(parts, " "))
		}
	}
}
