package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/audit"
)

// auditFlags are the flags of `worker audit`.
type auditFlags struct {
	ops                      opsFlags
	brokers, dialMap, topics string
	dlq, from, to, group     string
	since, until             string
	asJSON, records          bool
	batch, listed            int
	timeout                  time.Duration
	retention                time.Duration
}

func (c *auditFlags) define(f *flags) {
	c.ops.define(f)
	f.stringVar(&c.brokers, "brokers", "LEASEHOLD_BROKERS", "", "Kafka seed brokers, host:port comma-separated")
	f.stringVar(&c.dialMap, "kafka-dial-map", "LEASEHOLD_KAFKA_DIAL_MAP", "", "connect to other addresses than the brokers advertise: advertised=dial pairs, comma-separated")
	f.stringVar(&c.topics, "topics", "LEASEHOLD_TOPICS", leasehold.DefaultTopic, "the worker's topics: the first is audited; the dead-letter topic defaults to it + .dlq")
	f.stringVar(&c.dlq, "dlq", "LEASEHOLD_DLQ", "", "dead-letter topic (default: first topic + .dlq)")
	f.stringVar(&c.group, "group", "LEASEHOLD_GROUP", leasehold.DefaultGroup, "the workers' consumer group: a record past its committed offset with no Redis record is pending, not unaccounted; empty: every such record is unaccounted")
	f.stringVar(&c.from, "from", "", "", "first offset audited: N (every partition) or P:N pairs, comma-separated; default: the log start")
	f.stringVar(&c.to, "to", "", "", "offset the audit stops before: N or P:N pairs; default: the end offsets when it starts")
	f.stringVar(&c.since, "since", "", "", "audit records written at or after this time: RFC 3339, or a duration ago (1h)")
	f.stringVar(&c.until, "until", "", "", "audit records written before this time: RFC 3339, or a duration ago")
	f.BoolVar(&c.asJSON, "json", false, "print JSON: the report as one object (with --records, one object a record, then the report)")
	f.BoolVar(&c.records, "records", false, "print every record's account, not only the unaccounted ones")
	f.durationVar(&c.retention, "retention", "LEASEHOLD_RETENTION", leasehold.DefaultRetention, "the workers' --retention: a record with no Redis record written longer ago than this is expired (its record may have lapsed), not unaccounted; 0: unaccounted")
	f.intVar(&c.batch, "batch", "", audit.DefaultBatch, "keys read from Redis in one pipeline, 1 to 1024")
	f.intVar(&c.listed, "max-listed", "", audit.DefaultMaxListed, "unaccounted records listed at most (all are counted)")
	f.durationVar(&c.timeout, "timeout", "", 30*time.Minute, "give up after this long")
}

func (c *auditFlags) check() error {
	switch {
	case len(splitList(c.brokers)) == 0:
		return usagef("no Kafka brokers: pass --brokers (env LEASEHOLD_BROKERS)")
	case len(splitList(c.topics)) == 0:
		return usagef("no topic: pass --topics")
	case c.from != "" && c.since != "", c.to != "" && c.until != "":
		return usagef("give offsets (--from, --to) or times (--since, --until) for each end, not both")
	case c.batch < 1 || c.batch > 1024:
		return usagef("batch %d: want 1 to 1024", c.batch)
	case c.listed < 1:
		return usagef("max-listed %d: want at least 1", c.listed)
	case c.timeout <= 0:
		return usagef("timeout %v: want more than 0", c.timeout)
	case c.retention < 0:
		return usagef("retention %v: want 0 or more", c.retention)
	}
	if _, err := parseDialMap(c.dialMap); err != nil {
		return err
	}
	return nil
}

func cmdAudit(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "audit", "")
	var c auditFlags
	c.define(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(splitList(c.brokers)...)}
	if m, _ := parseDialMap(c.dialMap); len(m) > 0 {
		conn = append(conn, kgo.Dialer(m.dial))
	}
	adm, err := kgo.NewClient(conn...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer adm.Close()
	cfg := audit.Config{Admin: adm, ConnOpts: conn, Topic: splitList(c.topics)[0], DLQ: c.dlq, Retention: c.retention,
		Batch: c.batch, MaxListed: c.listed, IsCancelled: leasehold.IsCancelledFailure}
	if cfg.DLQ == "" {
		cfg.DLQ = cfg.Topic + ".dlq"
	}
	if cfg.From, cfg.To, err = c.rangeOf(ctx, adm, cfg.Topic); err != nil {
		return err
	}
	if cfg.Committed, err = committed(ctx, adm, c.group, cfg.Topic); err != nil {
		return err
	}
	if c.group != "" && len(cfg.Committed) == 0 {
		_, _ = fmt.Fprintf(e.Stderr, "audit: group %s has no committed offset on %s: records not consumed yet count as unaccounted (pass the workers' --group)\n",
			c.group, cfg.Topic)
	}
	ops, err := openOps(ctx, e, c.ops)
	if err != nil {
		return err
	}
	defer ops.close(context.WithoutCancel(ctx))
	if cfg.Store, err = ops.in.Store(ctx); err != nil {
		return err
	}
	cfg.Progress = func(done, total int64) {
		_, _ = fmt.Fprintf(e.Stderr, "audit: %d of %d records\n", done, total)
	}
	enc := json.NewEncoder(e.Stdout)
	if c.records {
		cfg.Each = func(en audit.Entry) { printEntry(e.Stdout, enc, en, c.asJSON) }
	}
	rep, err := audit.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return printAudit(e.Stdout, enc, rep, c.asJSON)
}

// rangeOf resolves --from/--to or --since/--until to offsets by partition.
func (c *auditFlags) rangeOf(ctx context.Context, cl *kgo.Client, topic string) (from, to map[int32]int64, err error) {
	if from, err = parseOffsets("from", c.from); err != nil {
		return nil, nil, err
	}
	if to, err = parseOffsets("to", c.to); err != nil {
		return nil, nil, err
	}
	if c.since != "" {
		if from, err = offsetsAt(ctx, cl, topic, "since", c.since); err != nil {
			return nil, nil, err
		}
	}
	if c.until != "" {
		if to, err = offsetsAt(ctx, cl, topic, "until", c.until); err != nil {
			return nil, nil, err
		}
	}
	return from, to, nil
}

// committed returns group's committed offsets on topic (none for no group).
func committed(ctx context.Context, cl *kgo.Client, group, topic string) (map[int32]int64, error) {
	out := map[int32]int64{}
	if group == "" {
		return out, nil
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	for p, o := range offs[topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out, nil
}

// parseOffsets reads "N" (every partition: returned under -1) or "P:N,...".
func parseOffsets(name, s string) (map[int32]int64, error) {
	if s == "" {
		return nil, nil
	}
	out := map[int32]int64{}
	for _, item := range splitList(s) {
		ps, ns, pair := strings.Cut(item, ":")
		if !pair {
			ps, ns = "-1", item
		}
		p, err1 := strconv.ParseInt(ps, 10, 32)
		n, err2 := strconv.ParseInt(ns, 10, 64)
		if err1 != nil || err2 != nil || n < 0 || (pair && p < 0) {
			return nil, usagef("--%s %q: want an offset N, or partition:offset pairs, comma-separated", name, item)
		}
		out[int32(p)] = n
	}
	if all, ok := out[audit.AllPartitions]; ok {
		if len(out) > 1 {
			return nil, usagef("--%s: give one offset for every partition, or partition:offset pairs, not both", name)
		}
		return map[int32]int64{audit.AllPartitions: all}, nil
	}
	return out, nil
}

// offsetsAt returns, for each partition of topic, the offset of the first
// record written at or after the time s names (the end offset if none).
func offsetsAt(ctx context.Context, cl *kgo.Client, topic, name, s string) (map[int32]int64, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil || d < 0 {
			return nil, usagef("--%s %q: want an RFC 3339 time (2026-11-25T19:00:00Z) or a duration ago (1h)", name, s)
		}
		t = time.Now().Add(-d)
	}
	listed, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s at %s: %w", topic, t.UTC().Format(time.RFC3339), err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		} else if err == nil {
			err = fmt.Errorf("list offsets of %s[%d]: %w", topic, o.Partition, o.Err)
		}
	})
	return out, err
}

func printEntry(w io.Writer, enc *json.Encoder, en audit.Entry, asJSON bool) {
	if asJSON {
		_ = enc.Encode(en)
		return
	}
	line := fmt.Sprintf("%d@%d %s key %s", en.Partition, en.Offset, en.Outcome, orDash(keyShown(en.Key)))
	if en.Fence > 0 {
		line += fmt.Sprintf(" fence %d attempt %d", en.Fence, en.Attempt)
	}
	if en.Reason != "" {
		line += ": " + en.Reason
	}
	_, _ = fmt.Fprintln(w, line)
}

// printAudit prints the report; unaccounted records make it an error
// (exit 1).
func printAudit(w io.Writer, enc *json.Encoder, rep audit.Report, asJSON bool) error {
	if asJSON {
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		if len(rep.Unaccounted) > 0 {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(tw, "PARTITION\tOFFSET\tTIME\tTYPE\tKEY\tWHY")
			for _, en := range rep.Unaccounted {
				_, _ = fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", en.Partition, en.Offset, en.Time.Format(time.RFC3339),
					orDash(en.Type), orDash(keyShown(en.Key)), en.Reason)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		parts := make([]string, 0, len(audit.Outcomes()))
		for _, o := range audit.Outcomes() {
			parts = append(parts, fmt.Sprintf("%d %s", rep.Counts[o], o))
		}
		if _, err := fmt.Fprintf(w, "%s: %d records in %d partitions: %s\n", rep.Topic, rep.Records, len(rep.To),
			strings.Join(parts, ", ")); err != nil {
			return err
		}
	}
	if n := rep.Counts[audit.Unaccounted]; n > 0 {
		return fmt.Errorf("%d of %d records unaccounted for", n, rep.Records)
	}
	return nil
}
