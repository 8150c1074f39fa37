package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/fleet"
)

func cmdFleet(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "fleet", "")
	var o opsFlags
	o.define(f)
	asJSON := f.Bool("json", false, "print the fleet as one JSON object: workers, totals, rates and the last hour's series")
	timeout := f.Duration("timeout", 10*time.Second, "give up after this long")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usagef("timeout %v: want more than 0", *timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, err := openRedis(ctx, o.redisURL)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	samples := fleet.RatesOnly // the table needs the rates only
	if *asJSON {
		samples = fleet.MaxSamples
	}
	v, err := fleet.Read(ctx, rdb, o.prefix, samples)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(v)
	}
	return printFleet(e.Stdout, v)
}

func printFleet(w io.Writer, v fleet.View) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "WORKER\tVERSION\tUP\tGROUP\tTOPICS\tCONC\tRUNNING\tSUCCEEDED\tFAILED\tDLQ\tDUPS\tTAKEOVERS\tLOST\tJOBS/S")
	for _, x := range v.Workers {
		c := x.Counters
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\n", x.ID, x.Version,
			x.At.Sub(x.Started).Truncate(time.Second), x.Group, strings.Join(x.Topics, ","), x.Concurrency, x.Running,
			c.Succeeded, c.Failed, c.DeadLettered, c.Duplicates, c.Takeovers, c.LeasesLost, jobsRate(x.Rates))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r := v.Rates
	noun := "workers"
	if len(v.Workers) == 1 {
		noun = "worker"
	}
	_, err := fmt.Fprintf(w, "%d %s, %d running, %d leases held; per second over the last minute: "+
		"%.1f succeeded, %.1f failed, %.1f retried, %.1f dead-lettered, %.1f duplicates, %.2f takeovers, %.2f leases lost\n",
		len(v.Workers), noun, v.Running, v.LeasesHeld, r["succeeded"], r["failed"], r["retried"], r["dead_lettered"],
		r["duplicates"], r["takeovers"], r["leases_lost"])
	return err
}

// jobsRate is the jobs a second of every outcome.
func jobsRate(r map[string]float64) float64 {
	var n float64
	for _, o := range fleet.Outcomes {
		n += r[o]
	}
	return n
}
