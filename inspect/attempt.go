package inspect

import (
	"time"

	"github.com/leasehold/leasehold/idempotency"
)

// Attempt is one attempt of a key, from its history, as the console's key
// view and `worker history --json` show it. Fence is a JSON string, as every
// fence the console and the CLI print: fences are Redis time in
// microseconds, beyond the integers JavaScript reads exactly.
type Attempt struct {
	Attempt       int           `json:"attempt"`
	Fence         uint64        `json:"fence,string"`
	Owner         string        `json:"owner,omitempty"`  // digest of the lease's owner token
	Worker        string        `json:"worker,omitempty"` // host/pid of the worker that ran it
	Type          string        `json:"type,omitempty"`   // the job's type; "" in entries written before it was kept
	Started       *time.Time    `json:"started,omitempty"`
	Ended         *time.Time    `json:"ended,omitempty"`
	End           string        `json:"end"` // how it ended (idempotency.End*), "" while unknown
	TakenOver     bool          `json:"taken_over,omitempty"`
	Compensations []AttemptStep `json:"compensations"`
	TraceID       string        `json:"trace_id,omitempty"`
	SpanID        string        `json:"span_id,omitempty"`
	TraceURL      string        `json:"trace_url,omitempty"` // set by a presenter that links to a trace UI
}

// AttemptStep is one compensation step run for an [Attempt].
type AttemptStep struct {
	Step    string `json:"step"`
	Handler string `json:"handler,omitempty"`
	Outcome string `json:"outcome"` // compensated, retry, dead_lettered, superseded
}

// NewAttempts returns the shape of a key's history hs, oldest first, with
// times in UTC. traceURL, when not nil, links each attempt's trace ID.
func NewAttempts(hs []idempotency.Attempt, traceURL func(traceID string) string) []Attempt {
	out := make([]Attempt, 0, len(hs))
	for _, a := range hs {
		v := Attempt{Attempt: a.Attempt, Fence: a.Fence, Owner: a.Owner, Worker: a.Worker, Type: a.Type, End: a.End, TakenOver: a.TakenOver,
			Compensations: make([]AttemptStep, 0, len(a.Compensations)), TraceID: a.TraceID, SpanID: a.SpanID}
		for _, c := range a.Compensations {
			v.Compensations = append(v.Compensations, AttemptStep(c))
		}
		if traceURL != nil && a.TraceID != "" {
			v.TraceURL = traceURL(a.TraceID)
		}
		if !a.Started.IsZero() {
			t := a.Started.UTC()
			v.Started = &t
		}
		if !a.Ended.IsZero() {
			t := a.Ended.UTC()
			v.Ended = &t
		}
		out = append(out, v)
	}
	return out
}
