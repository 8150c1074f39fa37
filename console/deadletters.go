package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/inspect"
)

const (
	// maxDeadLetters bounds the dead-letter records one page holds.
	maxDeadLetters = 500
	// maxDeadLetterScans dead-letter reads run at once; a request that
	// finds them all running waits up to deadLetterScanWait for one to
	// end, then gets 503 with Retry-After.
	maxDeadLetterScans = 1
	deadLetterScanWait = 2 * time.Second
)

// deadLetterRow is one record of the dead-letter view: the Inspector's
// shape, its error text cut, with the key's trace link.
type deadLetterRow struct {
	inspect.DeadLetter
	TraceURL string `json:"trace_url,omitempty"`
}

// serveDeadLetters is GET api/deadletters?reason=&type=&key=&cursor=&limit=:
// one page of the dead-letter topic through the Inspector. Its read is
// bounded (Config.DeadLetterScan, Config.DeadLetterScanBytes): a page cut
// short has "cut" set and a "next" cursor that continues the read. One
// read runs at a time.
func (c *Console) serveDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dq := inspect.DeadLetterQuery{Reason: q.Get("reason"), Type: q.Get("type"), Key: q.Get("key"),
		Cursor: q.Get("cursor"), Limit: maxDeadLetters, MaxScan: c.cfg.DeadLetterScan, MaxScanBytes: c.cfg.DeadLetterScanBytes}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxDeadLetters {
			c.fail(w, http.StatusBadRequest, "limit", errors.New("want 1 to "+strconv.Itoa(maxDeadLetters)))
			return
		}
		dq.Limit = n
	}
	if _, _, err := inspect.ParseDeadLetterCursor(dq.Cursor); err != nil {
		c.fail(w, http.StatusBadRequest, "cursor", err)
		return
	}
	if !c.startDeadLetterScan(w, r) {
		return
	}
	defer func() { <-c.dlqScans }()
	ctx, cancel := context.WithTimeout(r.Context(), 2*timeout)
	defer cancel()
	page, err := c.in.DeadLetters(ctx, dq)
	if errors.Is(err, inspect.ErrBadCursor) {
		c.fail(w, http.StatusBadRequest, "cursor", err)
		return
	}
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, "read the dead-letter topic "+c.cfg.DLQ, err)
		return
	}
	out := struct {
		Topic    string          `json:"topic"`
		Records  []deadLetterRow `json:"records"`
		ByReason map[string]int  `json:"by_reason"` // of this page
		ByType   map[string]int  `json:"by_type"`
		Limit    int             `json:"limit"`
		Next     string          `json:"next"` // the cursor of the next page; "" at the end
		Scanned  int             `json:"scanned"`
		Cut      bool            `json:"cut"` // the read stopped at its bound before the page was full
	}{Topic: page.Topic, Records: make([]deadLetterRow, 0, len(page.Records)), Limit: dq.Limit, Next: page.Next,
		Scanned: page.Scanned, Cut: page.Cut}
	out.ByReason, out.ByType = inspect.DeadLetterCounts(page.Records)
	for _, d := range page.Records {
		d.Error = cut([]byte(d.Error), 300)
		out.Records = append(out.Records, deadLetterRow{DeadLetter: d, TraceURL: c.traceURL(d.Key)})
	}
	writeJSON(w, http.StatusOK, out)
}

// startDeadLetterScan takes a dead-letter read token, waiting up to
// deadLetterScanWait for one; without one it answers 503 with Retry-After
// (or nothing, when the client went away) and returns false.
func (c *Console) startDeadLetterScan(w http.ResponseWriter, r *http.Request) bool {
	select {
	case c.dlqScans <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(deadLetterScanWait)
	defer t.Stop()
	select {
	case c.dlqScans <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	case <-t.C:
		w.Header().Set("Retry-After", strconv.Itoa(int(deadLetterScanWait.Seconds())))
		c.fail(w, http.StatusServiceUnavailable, "another read of the dead-letter topic is running: try again in a moment", nil)
		return false
	}
}
