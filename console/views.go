package console

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// jobsPage is GET api/jobs?cursor=: one page of the leases held now.
type jobsPage struct {
	Rows       []leaseRow `json:"rows"`
	Next       string     `json:"next"` // the cursor of the next page; "" at the end
	RedisTime  time.Time  `json:"redis_time"`
	Standalone bool       `json:"standalone"`
}

func (c *Console) serveJobs(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	page, err := c.jobs(ctx, r.URL.Query().Get("cursor"))
	if errors.Is(err, inspect.ErrBadCursor) {
		c.fail(w, http.StatusBadRequest, "cursor", err)
		return
	}
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, "read the leases", err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (c *Console) jobs(ctx context.Context, cur string) (*jobsPage, error) {
	page, err := c.in.Leases(ctx, cur, c.cfg.PageSize)
	if err != nil {
		return nil, err
	}
	now, err := c.cfg.Redis.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	running := c.running()
	rows := make([]leaseRow, 0, len(page.Leases))
	for _, l := range page.Leases {
		row := leaseRow{Key: l.Name, Owner: l.Owner, Fence: l.Fence, RemainingMS: l.Remaining.Milliseconds()}
		if !l.Idempotency || leasehold.ValidateKey(l.Name) != nil {
			rows = append(rows, row) // another lease (a compensation's, or another library's)
			continue
		}
		row.Idempotency, row.TraceURL = true, c.traceURL(l.Name)
		c.seen.add(l.Name, l.Fence)
		if rj, ok := running[l.Name]; ok && rj.Fence == l.Fence {
			row.Type, row.ElapsedMS, row.ElapsedFrom = rj.Type, time.Since(rj.Started).Milliseconds(), "worker"
		} else if ms, ok := sinceFence(now, l.Fence); ok {
			row.ElapsedMS, row.ElapsedFrom = ms, "fence"
		}
		switch info := l.Record; {
		case l.RecordErr != nil && !errors.Is(l.RecordErr, idempotency.ErrCorrupt):
			row.Error = oneLine(l.RecordErr)
		case info != nil:
			row.State, row.Attempt = info.State.String(), info.Attempt
			if info.HasDetails {
				row.Details, row.DetailsSize, row.DetailsAge = cut(info.Details, maxDetails), info.DetailsSize, info.DetailsTTL.Milliseconds()
			}
		}
		rows = append(rows, row)
	}
	return &jobsPage{Rows: rows, Next: page.Next, RedisTime: now.UTC(), Standalone: c.cfg.Worker == nil}, nil
}

// running returns the Worker's running jobs by key (none standalone).
func (c *Console) running() map[string]leasehold.RunningJob {
	out := make(map[string]leasehold.RunningJob)
	if c.cfg.Worker == nil {
		return out
	}
	for _, j := range c.cfg.Worker.Running() {
		out[j.Key] = j
	}
	return out
}

// sinceFence estimates how long ago a lease of fence f was claimed: fences
// are Redis TIME in microseconds at the claim (one more than the previous
// fence when the clock had not passed it), so now minus the fence is the
// lease's age, when it is plausible (not ahead of now, under 30 days).
func sinceFence(now time.Time, f uint64) (int64, bool) {
	const maxAge = int64(30 * 24 * time.Hour / time.Microsecond)
	if f == 0 || f > math.MaxInt64 {
		return 0, false
	}
	age := now.UnixMicro() - int64(f)
	if age < 0 || age > maxAge {
		return 0, false
	}
	return age / 1000, true
}

// cut returns b as a string of at most n bytes, cut at a rune start, with
// invalid UTF-8 replaced.
func cut(b []byte, n int) string {
	if len(b) > n {
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b = b[:n]
	}
	return string([]rune(string(b)))
}

// keyView is GET api/key?key=.
type keyView struct {
	Key   string `json:"key"`
	Tag   string `json:"tag"`
	State string `json:"state"`
	Fence uint64 `json:"fence,string"`

	Attempt    int        `json:"attempt"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	HoldUntil  *time.Time `json:"hold_until,omitempty"`
	Result     *string    `json:"result,omitempty"` // COMPLETED: the cached result, cut to maxResult
	ResultSize int        `json:"result_size,omitempty"`
	Failure    string     `json:"failure,omitempty"` // FAILED: the cached error text

	Leased      bool   `json:"leased"`
	LeaseFence  uint64 `json:"lease_fence,string"`
	Owner       string `json:"owner"`
	RemainingMS int64  `json:"remaining_ms"`

	HasDetails  bool   `json:"has_details"`
	Details     string `json:"details,omitempty"`
	DetailsSize int    `json:"details_size,omitempty"`
	DetailsTTL  int64  `json:"details_kept_ms,omitempty"`

	Type      string `json:"type,omitempty"` // the running job's in this process, else its history's newest
	ElapsedMS int64  `json:"elapsed_ms,omitempty"`

	Journals   []inspect.Journal `json:"journals"`
	JournalErr string            `json:"journals_error,omitempty"`
	TraceURL   string            `json:"trace_url,omitempty"`

	History    []inspect.Attempt `json:"history"` // oldest first
	HistoryErr string            `json:"history_error,omitempty"`
}

// maxResult bounds the cached result a page receives, in bytes.
const maxResult = 2048

func (c *Console) serveKey(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if err := leasehold.ValidateKey(key); err != nil {
		c.fail(w, http.StatusBadRequest, "key", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ki, err := c.in.Key(ctx, key)
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, "inspect "+key, err)
		return
	}
	v := keyView{Key: key, Tag: ki.Tag, State: ki.State.String(), Fence: ki.Fence, Attempt: ki.Attempt,
		Failure: ki.Failure, Leased: ki.Leased, LeaseFence: ki.LeaseFence, Owner: ki.Owner,
		RemainingMS: ki.Remaining.Milliseconds(), HasDetails: ki.HasDetails, DetailsSize: ki.DetailsSize,
		DetailsTTL: ki.DetailsTTL.Milliseconds(), TraceURL: c.traceURL(key), Journals: []inspect.Journal{},
		History: inspect.NewAttempts(ki.History, c.attemptTraceURL)}
	if ki.HistoryErr != nil {
		v.HistoryErr = oneLine(ki.HistoryErr)
	}
	if ki.HasDetails {
		v.Details = cut(ki.Details, maxDetails)
	}
	if !ki.FinishedAt.IsZero() {
		t := ki.FinishedAt.UTC()
		v.FinishedAt = &t
	}
	if !ki.HoldUntil.IsZero() {
		t := ki.HoldUntil.UTC()
		v.HoldUntil = &t
	}
	if ki.State == idempotency.Completed {
		s := cut(ki.Result, maxResult)
		v.Result, v.ResultSize = &s, len(ki.Result)
	}
	if rj, ok := c.running()[key]; ok {
		v.Type, v.ElapsedMS = rj.Type, time.Since(rj.Started).Milliseconds()
	}
	v.Type = cmp.Or(v.Type, ki.Type)
	c.seen.add(key, ki.Fence, ki.LeaseFence)
	js, err := c.in.Journals(ctx, key, 10, c.seen.get(key)...)
	if err != nil {
		v.JournalErr = oneLine(err)
	}
	for _, j := range js {
		v.Journals = append(v.Journals, inspect.NewJournal(j, nil))
	}
	writeJSON(w, http.StatusOK, v)
}

// maxCompensations bounds the dead-lettered journals one page lists.
const maxCompensations = 100

func (c *Console) serveCompensations(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	js, err := c.in.Compensations(ctx, maxCompensations)
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, "list dead-lettered and pending compensations", err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Journals []inspect.Journal `json:"journals"`
		Limit    int               `json:"limit"`
		CanRetry bool              `json:"can_retry"` // handlers are registered (Config.Compensations)
	}{Journals: js, Limit: maxCompensations, CanRetry: c.cfg.Compensations != nil})
}
