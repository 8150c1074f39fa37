package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
)

// describeStuck explains a drain that timed out: for every partition of the
// jobs topic, the end offset and the group's committed offset (in share
// mode the share group's start offset: describeShare); the group's
// members and their assignments; and where the records of the unfinished
// keys sit. It is written to kafka-state.txt in the run directory and
// returned, so that a failing run says whether records were never fetched
// (committed below them, partition unassigned) or skipped (committed past
// them).
func (r *run) describeStuck(ctx context.Context, unfinished map[string]bool) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokerAddrs()...))
	if err != nil {
		return "kafka state: " + err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var b strings.Builder
	topic := leasehold.DefaultTopic

	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		fmt.Fprintf(&b, "end offsets: %v\n", err)
	}
	if r.cfg.Share {
		// No committed offsets: the share group's start offsets instead.
		describeShare(ctx, adm, r.cfg.ShareGroup(), &b)
		r.describeUnfinished(ctx, ends, unfinished, &b)
		return b.String()
	}
	committed, err := adm.FetchOffsets(ctx, leasehold.DefaultGroup)
	if err != nil {
		fmt.Fprintf(&b, "committed offsets: %v\n", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		at := int64(-1)
		if ok {
			at = c.At
		}
		fmt.Fprintf(&b, "partition %s/%d: end=%d committed=%d\n", o.Topic, o.Partition, o.Offset, at)
	})

	groups, err := adm.DescribeGroups(ctx, leasehold.DefaultGroup)
	if err != nil {
		fmt.Fprintf(&b, "group: %v\n", err)
	}
	for _, g := range groups {
		fmt.Fprintf(&b, "group %s: state=%s protocol=%s members=%d\n", g.Group, g.State, g.Protocol, len(g.Members))
		for _, m := range g.Members {
			var parts []string
			if ca, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range ca.Topics {
					for _, p := range t.Partitions {
						parts = append(parts, fmt.Sprintf("%s/%d", t.Topic, p))
					}
				}
			}
			slices.Sort(parts)
			fmt.Fprintf(&b, "  member %s (%s): %s\n", m.MemberID, m.ClientID, strings.Join(parts, " "))
		}
	}

	r.describeUnfinished(ctx, ends, unfinished, &b)
	return b.String()
}

// describeUnfinished lists where the records of the unfinished keys sit.
func (r *run) describeUnfinished(ctx context.Context, ends kadm.ListedOffsets, unfinished map[string]bool, b *strings.Builder) {
	if len(unfinished) > 0 {
		fmt.Fprintf(b, "records of the %d unfinished keys:\n", len(unfinished))
		b.WriteString(r.locate(ctx, ends, unfinished))
	}
}

// locate reads the jobs topic from the start to the end offsets and lists
// the records whose idempotency key is in keys.
func (r *run) locate(ctx context.Context, ends kadm.ListedOffsets, keys map[string]bool) string {
	parts := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			parts[o.Partition] = kgo.NewOffset().AtStart()
			want[o.Partition] = o.Offset
		}
	})
	if len(parts) == 0 {
		return "  (topic empty)\n"
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokerAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{leasehold.DefaultTopic: parts}))
	if err != nil {
		return "  " + err.Error() + "\n"
	}
	defer cl.Close()
	var b strings.Builder
	for len(want) > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(rec *kgo.Record) {
			for _, h := range rec.Headers {
				if h.Key == leasehold.HeaderKey && keys[string(h.Value)] {
					fmt.Fprintf(&b, "  %s at %d/%d\n", h.Value, rec.Partition, rec.Offset)
				}
			}
			if end, ok := want[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(want, rec.Partition)
			}
		})
	}
	return b.String()
}

// logStuck logs describeStuck's report.
func (r *run) logStuck(ctx context.Context, unfinished map[string]bool) {
	r.log.Warn("drain timeout: kafka state", slog.String("state", r.describeStuck(ctx, unfinished)))
}
