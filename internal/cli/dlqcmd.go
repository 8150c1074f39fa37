package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/inspect"
)

func cmdDLQ(ctx context.Context, e *Env, args []string) error {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	f := newFlags(e, "dlq", "list|replay   (flags after the subcommand)")
	var o opsFlags
	o.define(f)
	brokers := f.str("brokers", "LEASEHOLD_BROKERS", "", "Kafka seed brokers, host:port comma-separated")
	topics := f.str("topics", "LEASEHOLD_TOPICS", leasehold.DefaultTopic, "the worker's topics; the dead-letter topic defaults to the first + .dlq")
	dlq := f.str("dlq", "LEASEHOLD_DLQ", "", "dead-letter topic (default: first topic + .dlq)")
	var filter leasehold.DeadLetterFilter
	f.StringVar(&filter.Reason, "reason", "", "only records dead-lettered for this reason (e.g. "+leasehold.ReasonPermanent+", "+leasehold.ReasonMismatch+")")
	f.StringVar(&filter.Type, "type", "", "only records of this job type")
	f.StringVar(&filter.Key, "key", "", "only records of this idempotency key")
	f.IntVar(&filter.Limit, "limit", leasehold.DefaultDeadLetterLimit, "handle at most this many matching records, at least 1")
	timeout := f.Duration("timeout", 30*time.Second, "give up reading the dead-letter topic after this long")
	asJSON := f.Bool("json", false, "print JSON, one object a line")
	dryRun := f.Bool("dry-run", false, "replay: show what would be replayed; produce and mark nothing")
	cursor := f.String("cursor", "", "list: start at this cursor (printed at the end of a list cut by --limit)")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	switch {
	case sub != "list" && sub != "replay":
		return usagef("want 'dlq list [flags]' or 'dlq replay [flags]'")
	case sub == "list" && *dryRun:
		return usagef("--dry-run is for dlq replay")
	case sub == "replay" && *cursor != "":
		return usagef("--cursor is for dlq list")
	case filter.Limit < 1:
		return usagef("limit %d: want at least 1", filter.Limit)
	case len(splitList(*brokers)) == 0:
		return usagef("no Kafka brokers: pass --brokers (env LEASEHOLD_BROKERS)")
	case *timeout <= 0:
		return usagef("timeout %v: want more than 0", *timeout)
	}
	ts := splitList(*topics)
	if *dlq == "" && len(ts) > 0 {
		*dlq = ts[0] + ".dlq"
	}
	if *dlq == "" {
		return usagef("no dead-letter topic: pass --dlq or --topics")
	}
	w, closeAll, err := operatorWorker(ctx, e, o, leasehold.WithKafka(kgo.SeedBrokers(splitList(*brokers)...)),
		leasehold.WithTopics(ts...), leasehold.WithDeadLetterTopic(*dlq))
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if sub == "list" {
		q := inspect.DeadLetterQuery{Reason: filter.Reason, Type: filter.Type, Key: filter.Key, Cursor: *cursor}
		return listDeadLetters(ctx, e.Stdout, w.Inspector(), q, filter.Limit, *asJSON)
	}
	res, err := w.ReplayDeadLetters(ctx, filter, *dryRun)
	if err != nil {
		return policyHint(err)
	}
	return printReplays(e.Stdout, res, *asJSON, e.application().name)
}

// listDeadLetters prints up to limit records matching q, reading pages of
// the Inspector; when more remain, it ends with the cursor to go on from.
func listDeadLetters(ctx context.Context, w io.Writer, in *inspect.Inspector, q inspect.DeadLetterQuery, limit int, asJSON bool) error {
	defer func() { _ = in.Close(context.WithoutCancel(ctx)) }()
	var dls []inspect.DeadLetter
	for {
		q.Limit = min(limit-len(dls), inspect.MaxDeadLetterPage)
		page, err := in.DeadLetters(ctx, q)
		if err != nil {
			return err
		}
		dls = append(dls, page.Records...)
		q.Cursor = page.Next
		if q.Cursor == "" || len(dls) >= limit {
			break
		}
	}
	if err := printDeadLetters(w, dls, asJSON); err != nil || q.Cursor == "" || asJSON {
		return err
	}
	_, err := fmt.Fprintf(w, "more: --cursor %s\n", q.Cursor)
	return err
}

// printDeadLetters prints the Inspector's dead letters: a table, or JSON
// (one object a line, the console's field names).
func printDeadLetters(w io.Writer, dls []inspect.DeadLetter, asJSON bool) error {
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
	_, _ = fmt.Fprintln(tw, "PARTITION\tOFFSET\tTIME\tREASON\tTYPE\tKEY\tFROM\tREPLAY\tERROR")
	for _, d := range dls {
		_, _ = fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Partition, d.Offset,
			d.Time.UTC().Format(time.RFC3339), d.Reason, orDash(d.Type), orDash(keyShown(d.Key)),
			fmt.Sprintf("%s/%d@%d", d.OrigTopic, d.OrigPartition, d.OrigOffset), orDash(d.Replay), truncate(d.Error, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d dead-lettered records\n", len(dls))
	return err
}

// printReplays prints what a replay did with each record; prog is the
// program's name, for the reset hint.
func printReplays(w io.Writer, res []leasehold.ReplayResult, asJSON bool, prog string) error {
	counts := map[string]int{}
	enc := json.NewEncoder(w)
	for _, r := range res {
		counts[r.Outcome]++
		if asJSON {
			v := struct {
				leasehold.ReplayResult
				Error string `json:"error,omitempty"`
			}{ReplayResult: r}
			if r.Err != nil {
				v.Error = r.Err.Error()
			}
			if err := enc.Encode(v); err != nil {
				return err
			}
			continue
		}
		line := fmt.Sprintf("%s: %d@%d key %s -> %s/%d", r.Outcome, r.Partition, r.Offset, orDash(keyShown(r.Key)), r.OrigTopic, r.OrigPartition)
		if r.To >= 0 {
			line += fmt.Sprintf("@%d", r.To)
		}
		if r.Err != nil {
			line += ": " + truncate(r.Err.Error(), 200)
		}
		if r.Hint != "" {
			line += " (" + r.Hint + ")"
		}
		if r.Outcome == leasehold.ReplayNeedsReset {
			line += fmt.Sprintf(": %s reset %s", prog, keyShown(r.Key))
		}
		_, _ = fmt.Fprintln(w, line)
	}
	if asJSON {
		return nil
	}
	_, err := fmt.Fprintf(w, "%d replayed, %d already replayed, %d pending, %d need a reset, %d would be replayed, %d failed\n",
		counts[leasehold.ReplayProduced], counts[leasehold.ReplayDone], counts[leasehold.ReplayPending],
		counts[leasehold.ReplayNeedsReset], counts[leasehold.ReplayWould], counts[leasehold.ReplayFailed])
	if err == nil && counts[leasehold.ReplayFailed] > 0 {
		return fmt.Errorf("%d records failed to replay", counts[leasehold.ReplayFailed])
	}
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// keyShown quotes a key with characters a terminal would interpret.
func keyShown(k string) string {
	if strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Sprintf("%q", k)
	}
	return k
}
