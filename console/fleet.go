package console

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/fleet"
)

// seriesEvery is how often the overview reads the fleet's whole hour: the
// workers add a sample a minute; in between, it reads only what the rates
// need.
const seriesEvery = 30 * time.Second

// fleetSeries caches the fleet's last hour.
type fleetSeries struct {
	mu     sync.Mutex
	points []fleet.Point
	at     time.Time
}

// fleetView is the overview's account of the fleet: what every live
// worker publishes to Redis (see internal/fleet), so that a standalone
// console shows the figures counted inside worker processes.
type fleetView struct {
	Workers    int                `json:"workers"`
	Running    int                `json:"running"`
	LeasesHeld int                `json:"leases_held"`
	Counters   fleet.Counters     `json:"counters"` // of the live workers, since each started
	Rates      map[string]float64 `json:"rates"`    // per second over the last minute, summed
	Series     []fleet.Point      `json:"series"`   // the last hour, one point a minute, oldest first
}

// readFleet adds the fleet to ov; a standalone console shows its figures
// instead of "n/a".
func (c *Console) readFleet(ctx context.Context, ov *overview) {
	c.series.mu.Lock()
	defer c.series.mu.Unlock()
	whole := c.series.points == nil || time.Since(c.series.at) >= seriesEvery
	samples := fleet.RatesOnly
	if whole {
		samples = fleet.MaxSamples
	}
	v, err := fleet.Read(ctx, c.cfg.Redis, c.cfg.KeyPrefix, samples)
	if err != nil {
		ov.Unavailable = append(ov.Unavailable, "the fleet's figures: "+oneLine(err))
		return
	}
	if whole {
		c.series.points, c.series.at = v.Series, time.Now()
	}
	ov.Fleet = &fleetView{Workers: len(v.Workers), Running: v.Running, LeasesHeld: v.LeasesHeld,
		Counters: v.Counters, Rates: v.Rates, Series: c.series.points}
}
