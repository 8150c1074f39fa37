package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/leasehold/leasehold/inspect"
)

// maxDeadLetters bounds the dead-letter records one page holds.
const maxDeadLetters = 500

// deadLetterRow is one record of the dead-letter view: the Inspector's
// shape, its error text cut, with the key's trace link.
type deadLetterRow struct {
	inspect.DeadLetter
	TraceURL string `json:"trace_url,omitempty"`
}

// serveDeadLetters is GET api/deadletters?reason=&type=&key=&cursor=&limit=:
// one page of the dead-letter topic through the Inspector. Its read is
// bounded (Config.DeadLetterScan, Config.DeadLetterScanBytes): a page cut
// short has "cut" set and a "next" cursor that continues the read.
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
