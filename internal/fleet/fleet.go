// Package fleet is how workers make themselves seen: each worker publishes
// its identity, its running jobs and its counters to Redis at its renew
// interval, and a sample a minute for the last hour; `worker fleet` and the
// console read them back. The record expires a few intervals after the
// worker stops publishing (kill -9), and is deleted at a clean shutdown.
//
// Keys, under the worker's key prefix:
//
//	fleet:workers       sorted set: member = worker ID, score = last publish (ms); pruned of members an hour old
//	fleet:w:<id>        string: the worker's Status as JSON, PX = TTL (DefaultTTLIntervals publish intervals)
//	fleet:s:<id>        list: Samples as JSON, newest first, at most MaxSamples, PX = one hour past the last
//
// Listing reads the sorted set, then the status strings and the series in
// one pipeline; a member whose status is gone (deleted at shutdown, or
// expired) is a stopped worker: it is not listed, but its series still
// counts in the fleet's last hour.
package fleet

import (
	"encoding/json"
	"time"
)

// Defaults.
const (
	// DefaultTTLIntervals is how many publish intervals a worker's status
	// outlives its last publish.
	DefaultTTLIntervals = 3
	// SampleEvery is the spacing of a worker's series samples.
	SampleEvery = time.Minute
	// MaxSamples bounds a worker's series: the last hour.
	MaxSamples = 60
	// MaxWorkers bounds the workers a listing reads.
	MaxWorkers = 1000
)

// Identity names a worker process.
type Identity struct {
	ID          string    `json:"id"` // host/pid/start (unique per process)
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Version     string    `json:"version"`
	Started     time.Time `json:"started"`
	Topics      []string  `json:"topics"`
	Group       string    `json:"group"`
	Concurrency int       `json:"concurrency"`
}

// Counters are a worker's counts since it started.
type Counters struct {
	Succeeded    int64 `json:"succeeded"`
	Failed       int64 `json:"failed"`
	Retried      int64 `json:"retried"`
	DeadLettered int64 `json:"dead_lettered"`
	Duplicates   int64 `json:"duplicates"`
	Takeovers    int64 `json:"takeovers"`
	LeasesLost   int64 `json:"leases_lost"`
}

// Outcomes names the job outcomes of Counters, in display order.
var Outcomes = []string{"succeeded", "failed", "retried", "dead_lettered", "duplicates"}

// get returns the counter of outcome name (see Outcomes), or the
// takeovers and leases lost.
func (c Counters) get(name string) int64 {
	switch name {
	case "succeeded":
		return c.Succeeded
	case "failed":
		return c.Failed
	case "retried":
		return c.Retried
	case "dead_lettered":
		return c.DeadLettered
	case "duplicates":
		return c.Duplicates
	case "takeovers":
		return c.Takeovers
	case "leases_lost":
		return c.LeasesLost
	}
	return 0
}

func (c Counters) add(o Counters) Counters {
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Retried += o.Retried
	c.DeadLettered += o.DeadLettered
	c.Duplicates += o.Duplicates
	c.Takeovers += o.Takeovers
	c.LeasesLost += o.LeasesLost
	return c
}

// Load is what a worker does now.
type Load struct {
	Running    int `json:"running"`     // jobs running (each holds a lease)
	LeasesHeld int `json:"leases_held"` // leases held by the worker's jobs
	// CommitLag is the sum over the worker's assigned partitions of the
	// high watermark minus the committed offset: the records fetched or
	// waiting that the group has not committed, from what the worker
	// fetched and committed (no broker call).
	CommitLag int64    `json:"commit_lag"`
	Counters  Counters `json:"counters"`
}

// Status is what a worker publishes at each interval.
type Status struct {
	Identity
	Load
	At         time.Time `json:"at"`          // when published (the worker's clock)
	IntervalMS int64     `json:"interval_ms"` // its publish interval
}

// Sample is one point of a worker's series.
type Sample struct {
	At time.Time `json:"t"`
	Load
}

func marshal(v any) string {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	return string(b)
}
