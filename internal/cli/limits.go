package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/inspect"
)

// cmdLimits lists the fleet-wide limit groups (running/limit, rate, hold),
// or holds or releases one.
func cmdLimits(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "limits", "[GROUP...]")
	var o opsFlags
	o.define(f)
	asJSON := f.Bool("json", false, "print JSON: {\"groups\": [{group, limit, rate, burst, running, held_until, last_used, slots: [{key, holder, deadline}]}]}")
	hold := f.Duration("hold", 0, "hold every job of GROUP for this long across the fleet (as a handler's RetryAfter does)")
	release := f.Bool("release", false, "end the hold of GROUP now")
	if err := f.parse(args); err != nil {
		return err
	}
	if (*hold > 0 || *release) && f.NArg() != 1 {
		return usagef("--hold and --release want exactly one GROUP")
	}
	if *hold < 0 || (*hold > 0 && *release) {
		return usagef("give either a positive --hold or --release")
	}
	ops, err := openOps(ctx, e, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	switch {
	case *hold > 0:
		left, err := ops.in.HoldLimit(ctx, f.Arg(0), *hold)
		if err != nil {
			return groupErr(err)
		}
		_, _ = fmt.Fprintf(e.Stdout, "held %s for %s: no worker claims its jobs until then; running ones finish\n", f.Arg(0), left.Round(time.Millisecond))
		return nil
	case *release:
		was, err := ops.in.ReleaseLimitHold(ctx, f.Arg(0))
		if err != nil {
			return groupErr(err)
		}
		if !was {
			_, _ = fmt.Fprintf(e.Stdout, "%s was not held\n", f.Arg(0))
			return nil
		}
		_, _ = fmt.Fprintf(e.Stdout, "released the hold of %s: its jobs run from their next look (within one renew interval)\n", f.Arg(0))
		return nil
	}
	gs, err := ops.in.Limits(ctx, f.Args()...)
	if err != nil {
		return groupErr(err)
	}
	if *asJSON {
		return writeJSON(e.Stdout, newLimitsJSON(gs))
	}
	return printLimits(e.Stdout, gs)
}

// groupErr makes a group name no worker uses a usage error (exit 2).
func groupErr(err error) error {
	if errors.Is(err, inspect.ErrBadGroup) {
		return &usageError{err}
	}
	return err
}

func printLimits(w io.Writer, gs []inspect.LimitGroup) error {
	if len(gs) == 0 {
		_, err := fmt.Fprintln(w, "no limit group in use (none registered with WithConcurrencyLimit, WithLimitKey or WithRateLimit, or no worker ran one yet)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "GROUP\tRUNNING/LIMIT\tRATE\tHELD UNTIL\tLAST USED")
	for _, g := range gs {
		lim, rate, held, used := "-", "-", "-", "-"
		if g.Limit > 0 {
			lim = fmt.Sprint(g.Limit)
		}
		if g.Rate > 0 {
			rate = fmt.Sprintf("%g/s burst %d", g.Rate, max(g.Burst, 1))
		}
		if !g.HeldUntil.IsZero() {
			held = g.HeldUntil.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		if !g.LastUsed.IsZero() {
			used = g.LastUsed.UTC().Format(time.RFC3339)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d/%s\t%s\t%s\t%s\n", g.Group, g.Running, lim, rate, held, used)
	}
	return tw.Flush()
}

type limitsJSON struct {
	Groups []limitGroupJSON `json:"groups"`
}

type limitGroupJSON struct {
	Group     string          `json:"group"`
	Limit     int             `json:"limit"`
	Rate      float64         `json:"rate"`
	Burst     int             `json:"burst"`
	Running   int             `json:"running"`
	HeldUntil *time.Time      `json:"held_until"` // null when not held
	LastUsed  *time.Time      `json:"last_used"`
	Slots     []limitSlotJSON `json:"slots"`
}

type limitSlotJSON struct {
	Key      string    `json:"key"`
	Holder   string    `json:"holder"`
	Deadline time.Time `json:"deadline"`
}

func newLimitsJSON(gs []inspect.LimitGroup) limitsJSON {
	out := limitsJSON{Groups: make([]limitGroupJSON, 0, len(gs))}
	for _, g := range gs {
		j := limitGroupJSON{Group: g.Group, Limit: g.Limit, Rate: g.Rate, Burst: g.Burst, Running: g.Running,
			Slots: make([]limitSlotJSON, 0, len(g.Slots))}
		if !g.HeldUntil.IsZero() {
			t := g.HeldUntil.UTC()
			j.HeldUntil = &t
		}
		if !g.LastUsed.IsZero() {
			t := g.LastUsed.UTC()
			j.LastUsed = &t
		}
		for _, s := range g.Slots {
			j.Slots = append(j.Slots, limitSlotJSON{Key: s.Key, Holder: s.Holder, Deadline: s.Deadline.UTC()})
		}
		out.Groups = append(out.Groups, j)
	}
	return out
}
