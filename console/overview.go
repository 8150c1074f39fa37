package console

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/leasehold/leasehold"
)

// snapshots caches the overview, so that any number of open pages cost
// Redis and Kafka one read per poll interval.
type snapshots struct {
	mu sync.Mutex
	ov *overview
	at time.Time
}

// overview is GET api/overview.
type overview struct {
	At         time.Time `json:"at"`
	Standalone bool      `json:"standalone"` // no Worker: process counters unavailable

	LeasesHeld    int64  `json:"leases_held"`
	LeasesPartial bool   `json:"leases_partial,omitempty"` // the count stopped at the scan budget: at least
	LeasesErr     string `json:"leases_error,omitempty"`

	Worker *workerStats `json:"worker,omitempty"`
	Fleet  *fleetView   `json:"fleet,omitempty"` // what the live workers publish (fleet.go)

	CompIndexed int64  `json:"compensations_open"` // journals not closed: open, sealed or compensating
	CompDead    int64  `json:"compensations_dead"`
	CompErr     string `json:"compensations_error,omitempty"`

	DLQTopic   string    `json:"dlq_topic"`
	DLQRecords *int64    `json:"dlq_records,omitempty"`
	Lag        []partLag `json:"lag"`
	KafkaErr   string    `json:"kafka_error,omitempty"`

	Unavailable []string `json:"unavailable,omitempty"` // what this console cannot show, in words

	Paused    []string `json:"paused"` // job types paused across the fleet (worker pause), sorted
	PausedErr string   `json:"paused_error,omitempty"`
}

type workerStats struct {
	Counters map[string]int64 `json:"counters"` // since the worker started; the page derives rates
	Running  int              `json:"running"`
	InFlight int              `json:"in_flight"`
	Parked   int              `json:"parked"`
}

type partLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
}

func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request) {
	ov := c.overview(r.Context())
	writeJSON(w, http.StatusOK, ov)
}

// overview returns the cached overview, or reads a new one when it is older
// than the poll interval.
func (c *Console) overview(ctx context.Context) *overview {
	c.snap.mu.Lock()
	defer c.snap.mu.Unlock()
	if c.snap.ov != nil && time.Since(c.snap.at) < c.cfg.PollInterval {
		return c.snap.ov
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	ov := c.readOverview(ctx)
	c.snap.ov, c.snap.at = ov, time.Now()
	return ov
}

func (c *Console) readOverview(ctx context.Context) *overview {
	ov := &overview{At: time.Now().UTC(), Standalone: c.cfg.Worker == nil, DLQTopic: c.cfg.DLQ, Lag: []partLag{}}
	if n, partial, err := c.in.CountLeases(ctx, c.cfg.ScanBudget); err != nil {
		ov.LeasesErr = oneLine(err)
	} else {
		ov.LeasesHeld, ov.LeasesPartial = n, partial
	}
	if cs, err := c.in.CompensationCounts(ctx); err != nil {
		ov.CompErr = oneLine(err)
	} else {
		ov.CompIndexed, ov.CompDead = cs.Indexed, cs.DeadLettered
	}
	c.readFleet(ctx, ov)
	c.readPaused(ctx, ov)
	if w := c.cfg.Worker; w != nil {
		ov.Worker = statsOf(w)
	} else {
		ov.Unavailable = append(ov.Unavailable,
			"job types and exact start times of running jobs: elapsed is estimated from the fence (Redis time at the claim)")
	}
	c.readKafka(ctx, ov)
	return ov
}

func statsOf(w *leasehold.Worker) *workerStats {
	s := w.Stats()
	cs := map[string]int64{
		"started": s.Started, "succeeded": s.Succeeded, "retried": s.Retried, "failed": s.Failed,
		"dead_lettered": s.DeadLettered, "replayed": s.Replayed, "leases_lost": s.LeasesLost, "pauses": s.Pauses,
	}
	for o, n := range s.Claimed {
		cs["claim_"+o.String()] = n
	}
	return &workerStats{Counters: cs, Running: len(w.Running()), InFlight: s.InFlight, Parked: s.Parked}
}

// readKafka adds the dead-letter topic's size and the group's commit lag.
func (c *Console) readKafka(ctx context.Context, ov *overview) {
	cl, err := c.kafka()
	switch {
	case err != nil:
		ov.KafkaErr = oneLine(err)
		return
	case cl == nil:
		ov.KafkaErr = "no Kafka client: set Config.Kafka (the ui command's --brokers), or start the Worker"
		return
	}
	adm := kadm.NewClient(cl)
	start, err1 := adm.ListStartOffsets(ctx, c.cfg.DLQ)
	end, err2 := adm.ListEndOffsets(ctx, c.cfg.DLQ)
	if err := firstErr(err1, err2, start.Error(), end.Error()); err != nil {
		ov.KafkaErr = "dead-letter topic " + c.cfg.DLQ + ": " + oneLine(err)
	} else {
		var n int64
		end.Each(func(o kadm.ListedOffset) {
			if s, ok := start.Lookup(o.Topic, o.Partition); ok {
				n += o.Offset - s.Offset
			}
		})
		ov.DLQRecords = &n
	}
	lags, err := adm.Lag(ctx, c.cfg.Group)
	if err != nil {
		ov.KafkaErr = "commit lag of group " + c.cfg.Group + ": " + oneLine(err)
		return
	}
	for _, g := range lags {
		if g.Error() != nil {
			ov.KafkaErr = "commit lag of group " + c.cfg.Group + ": " + oneLine(g.Error())
			continue
		}
		for _, l := range g.Lag.Sorted() {
			if l.Err != nil {
				continue
			}
			ov.Lag = append(ov.Lag, partLag{Topic: l.Topic, Partition: l.Partition, Committed: l.Commit.At, End: l.End.Offset, Lag: l.Lag})
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
