package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// cmdHistory prints the attempts of one key, oldest first, as the
// Inspector reads them from the key's history.
func cmdHistory(ctx context.Context, e *Env, args []string) error {
	asJSON := false
	k, ops, err := openKeyCommand(ctx, e, "history", args, func(f *flags) {
		f.BoolVar(&asJSON, "json", false, "print JSON: {\"key\", \"attempts\": [{attempt, fence, owner, worker, type, started, ended, end, taken_over, compensations, trace_id, span_id}]}")
	})
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	hs, err := ops.in.History(ctx, k)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.Stdout, newHistoryJSON(k, hs))
	}
	return printHistory(e.Stdout, k, hs)
}

func printHistory(w io.Writer, k string, hs []idempotency.Attempt) error {
	if len(hs) == 0 {
		_, err := fmt.Fprintf(w, "no attempt of %s in its history (never run, history off, or past the retention)\n", k)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ATTEMPT\tFENCE\tOWNER\tWORKER\tTYPE\tSTARTED\tTOOK\tEND\tCOMPENSATIONS\tTRACE")
	for _, a := range hs {
		took, end := "-", a.End
		if !a.Ended.IsZero() && !a.Started.IsZero() {
			took = a.Ended.Sub(a.Started).Round(time.Millisecond).String()
		}
		if end == "" {
			end = "running (or its worker died)"
		} else if a.TakenOver && end != idempotency.EndTakenOver {
			end += " (taken over)"
		}
		_, _ = fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Fence, dash(a.Owner), dash(a.Worker), dash(a.Type),
			a.Started.UTC().Format("2006-01-02T15:04:05.000Z"), took, end, compensations(a.Compensations), dash(a.TraceID))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// compensations renders an attempt's compensation steps: step:outcome, ...
func compensations(cs []idempotency.CompensationStep) string {
	if len(cs) == 0 {
		return "-"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Step + ":" + c.Outcome
	}
	return strings.Join(parts, ",")
}

type historyJSON struct {
	Key      string            `json:"key"`
	Attempts []inspect.Attempt `json:"attempts"`
}

func newHistoryJSON(k string, hs []idempotency.Attempt) historyJSON {
	return historyJSON{Key: k, Attempts: inspect.NewAttempts(hs, nil)}
}
