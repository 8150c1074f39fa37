package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/leasehold/leasehold"
)

// cmdPause pauses a job type fleet-wide, or lists the paused types when
// given none.
func cmdPause(ctx context.Context, e *Env, args []string) error {
	return pauseCommand(ctx, e, "pause", args)
}

// cmdResume lifts the pause of a job type.
func cmdResume(ctx context.Context, e *Env, args []string) error {
	return pauseCommand(ctx, e, "resume", args)
}

func pauseCommand(ctx context.Context, e *Env, name string, args []string) error {
	f := newFlags(e, name, "TYPE")
	var o opsFlags
	o.define(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if name == "pause" && f.NArg() == 0 {
		return listPaused(ctx, e, o)
	}
	if f.NArg() != 1 {
		return usagef("want exactly one argument, the job type")
	}
	typ := f.Arg(0)
	if err := leasehold.ValidateType(typ); err != nil {
		return &usageError{err}
	}
	ops, err := openOps(ctx, e, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	if name == "pause" {
		if err := ops.in.Pause(ctx, typ); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(e.Stdout, "paused %s: every worker holds its new records from its next lease renewal; running jobs finish\n", typ)
		return nil
	}
	was, err := ops.in.Resume(ctx, typ)
	if err != nil {
		return err
	}
	if !was {
		_, _ = fmt.Fprintf(e.Stdout, "%s was not paused\n", typ)
		return nil
	}
	_, _ = fmt.Fprintf(e.Stdout, "resumed %s: the workers run its held records within about two renew intervals\n", typ)
	return nil
}

func listPaused(ctx context.Context, e *Env, o opsFlags) error {
	ops, err := openOps(ctx, e, o)
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	p, err := ops.in.Paused(ctx)
	if err != nil {
		return err
	}
	types := make([]string, 0, len(p))
	for t := range p {
		types = append(types, t)
	}
	sort.Strings(types)
	if len(types) == 0 {
		_, _ = fmt.Fprintln(e.Stdout, "no job type is paused")
	}
	for _, t := range types {
		_, _ = fmt.Fprintf(e.Stdout, "%s\tpaused since %s\n", t, p[t].UTC().Format(time.RFC3339))
	}
	return nil
}
