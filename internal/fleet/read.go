package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Worker is a live worker as listed: its status, and its rates over the
// last sample interval (per second, by outcome name, plus "takeovers"
// and "leases_lost"; empty until it has a sample 10s older than its status).
type Worker struct {
	Status
	Rates map[string]float64 `json:"rates"`
}

// Point is one minute of the fleet's last hour: rates summed over the
// workers that sampled in it, and their running jobs, leases held and
// commit lag.
type Point struct {
	At         time.Time          `json:"t"`
	Rates      map[string]float64 `json:"rates"`
	Running    int                `json:"running"`
	LeasesHeld int                `json:"leases_held"`
	CommitLag  int64              `json:"commit_lag"`
	Rated      int                `json:"rated"` // workers with a rate in this minute (a worker's first sample has none)
}

// View is the fleet as read from Redis.
type View struct {
	At         time.Time          `json:"at"`
	Workers    []Worker           `json:"workers"` // live ones, by ID
	Running    int                `json:"running"`
	LeasesHeld int                `json:"leases_held"`
	CommitLag  int64              `json:"commit_lag"` // summed over the live workers (their partitions are disjoint)
	Counters   Counters           `json:"counters"`   // of the live workers, since each started
	Rates      map[string]float64 `json:"rates"`      // summed over the live workers
	Series     []Point            `json:"series"`     // the last hour, oldest first
}

// rateNames are the counters a rate is computed for.
var rateNames = append(slices.Clone(Outcomes), "takeovers", "leases_lost")

// RatesOnly is the samples argument of [Read] that reads only what the
// workers' rates need (View.Series is then the last few minutes).
const RatesOnly = 3

// Read reads the fleet under prefix: every live worker, and the newest
// samples of each (at most samples, MaxSamples for the whole hour, at least
// RatesOnly) for the rates and View.Series.
func Read(ctx context.Context, rdb redis.UniversalClient, prefix string, samples int) (View, error) {
	samples = min(max(samples, RatesOnly), MaxSamples)
	v := View{At: time.Now().UTC(), Workers: []Worker{}, Rates: map[string]float64{}, Series: []Point{}}
	ids, err := rdb.ZRevRange(ctx, membersKey(prefix), 0, MaxWorkers-1).Result()
	if err != nil {
		return v, fmt.Errorf("fleet: list workers: %w", err)
	}
	pipe := rdb.Pipeline()
	sts := make([]*redis.StringCmd, len(ids))
	series := make([]*redis.StringSliceCmd, len(ids))
	for i, id := range ids {
		sts[i] = pipe.Get(ctx, statusKey(prefix, id))
		series[i] = pipe.LRange(ctx, seriesKey(prefix, id), 0, int64(samples)-1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return v, fmt.Errorf("fleet: read workers: %w", err)
	}
	buckets := map[int64]*Point{}
	for i := range ids {
		samples := decodeSamples(series[i].Val())
		addSeries(buckets, samples)
		raw, err := sts[i].Result()
		if err != nil {
			continue // stopped
		}
		var w Worker
		if json.Unmarshal([]byte(raw), &w.Status) != nil {
			continue
		}
		w.Rates = workerRates(w.Status, samples)
		v.Workers = append(v.Workers, w)
		v.Running += w.Running
		v.LeasesHeld += w.LeasesHeld
		v.CommitLag += w.CommitLag
		v.Counters = v.Counters.add(w.Counters)
		for k, r := range w.Rates {
			v.Rates[k] += r
		}
	}
	slices.SortFunc(v.Workers, func(a, b Worker) int { return cmpString(a.ID, b.ID) })
	for _, p := range buckets {
		v.Series = append(v.Series, *p)
	}
	slices.SortFunc(v.Series, func(a, b Point) int { return a.At.Compare(b.At) })
	return v, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decodeSamples decodes a series, newest first; damaged entries are left out.
func decodeSamples(raw []string) []Sample {
	out := make([]Sample, 0, len(raw))
	for _, r := range raw {
		var s Sample
		if json.Unmarshal([]byte(r), &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// workerRates are st's rates since its newest sample at least 10s older.
func workerRates(st Status, samples []Sample) map[string]float64 {
	for _, s := range samples {
		if dt := st.At.Sub(s.At); dt >= 10*time.Second {
			return rates(st.Counters, s.Counters, dt)
		}
	}
	return map[string]float64{}
}

func rates(now, then Counters, dt time.Duration) map[string]float64 {
	out := make(map[string]float64, len(rateNames))
	for _, n := range rateNames {
		out[n] = float64(max(now.get(n)-then.get(n), 0)) / dt.Seconds()
	}
	return out
}

// addSeries adds one worker's samples (newest first) to the minute
// buckets: each sample's load, and the rates since the sample before it.
func addSeries(buckets map[int64]*Point, samples []Sample) {
	for i, s := range samples {
		m := s.At.Truncate(time.Minute)
		p := buckets[m.Unix()]
		if p == nil {
			p = &Point{At: m, Rates: map[string]float64{}}
			buckets[m.Unix()] = p
		}
		p.Running += s.Running
		p.LeasesHeld += s.LeasesHeld
		p.CommitLag += s.CommitLag
		if i+1 < len(samples) {
			if dt := s.At.Sub(samples[i+1].At); dt > 0 {
				p.Rated++
				for k, r := range rates(s.Counters, samples[i+1].Counters, dt) {
					p.Rates[k] += r
				}
			}
		}
	}
}
