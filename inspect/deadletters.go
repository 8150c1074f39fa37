package inspect

import (
	"context"

	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/compensation"
)

// Dead-letter page bounds ([Inspector.DeadLetters]).
const (
	// DefaultDeadLetterPage is how many records a page holds when the
	// query's Limit is 0.
	DefaultDeadLetterPage = 100
	// MaxDeadLetterPage is the most records one page holds.
	MaxDeadLetterPage = 1000
)

// DeadLetter is one record of the dead-letter topic, as the console and
// the CLI show it.
type DeadLetter struct {
	Partition int32     `json:"partition"` // in the dead-letter topic
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time"` // when it was dead-lettered
	Reason    string    `json:"reason"`
	Error     string    `json:"error"`
	Key       string    `json:"key"` // idempotency key ("" for a record without one)
	Type      string    `json:"type"`
	// Where the record was consumed from.
	OrigTopic     string `json:"orig_topic"`
	OrigPartition int32  `json:"orig_partition"`
	OrigOffset    int64  `json:"orig_offset"`
	// Truncated is set on a stand-in copy (the full copy was refused as too
	// large): why, and the original size.
	Truncated string `json:"truncated,omitempty"`
	// Replay is "" (never replayed), "done" or "pending".
	Replay string `json:"replay"`
}

// DeadLetterQuery selects one page of dead letters. Empty filters match
// everything.
type DeadLetterQuery struct {
	Reason string // the dlq-reason header
	Type   string // the job type
	Key    string // the idempotency key
	// Cursor is the Next of the previous page; "" for the first page.
	Cursor string
	// Limit is the most records of the page: default
	// [DefaultDeadLetterPage], at most [MaxDeadLetterPage].
	Limit int
	// MaxScan bounds the records read, matching or not, and MaxScanBytes
	// their bytes (keys, values and headers): the read stops at the record
	// that reaches either, with a page that may hold fewer than Limit
	// records (none, with a filter that matched nothing) and a Next that
	// continues from there. 0: no bound, the read goes on until the page is
	// full or the topic read to its end.
	MaxScan      int
	MaxScanBytes int64
}

// DeadLetterPage is one page of dead letters, in partition and offset
// order.
type DeadLetterPage struct {
	Topic   string
	Records []DeadLetter
	// Next is the cursor of the next page; "" when the topic was read to
	// the end offsets listed when the call began.
	Next string
	// Scanned is how many records were read for the page, matching or
	// not; Cut is set when the query's MaxScan or MaxScanBytes stopped the
	// read before the page was full (Next then continues it).
	Scanned int
	Cut     bool
}

// DeadLetterSource reads pages of a dead-letter topic (the Kafka side of
// the Inspector, which itself reads Redis only). A leasehold.Worker's
// Inspector has one. The query it gets is bounded and its cursor parsed
// ([ParseDeadLetterCursor]).
type DeadLetterSource interface {
	DeadLetterPage(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error)
}

// WithDeadLetters gives the source [Inspector.DeadLetters] reads. Default:
// none ([ErrNoDeadLetters]).
func WithDeadLetters(src DeadLetterSource) Opt { return optFunc(func(c *cfg) { c.dlq = src }) }

// DeadLetters reads one page of the dead-letter records matching q, in
// partition and offset order, with their replay state. Pass the page's Next
// as the next query's Cursor to read on.
func (i *Inspector) DeadLetters(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error) {
	if i.cfg.dlq == nil {
		return DeadLetterPage{}, ErrNoDeadLetters
	}
	if err := i.open(); err != nil {
		return DeadLetterPage{}, err
	}
	switch {
	case q.Limit <= 0:
		q.Limit = DefaultDeadLetterPage
	case q.Limit > MaxDeadLetterPage:
		q.Limit = MaxDeadLetterPage
	}
	if _, _, err := ParseDeadLetterCursor(q.Cursor); err != nil {
		return DeadLetterPage{}, err
	}
	return i.cfg.dlq.DeadLetterPage(ctx, q)
}

func (i *Inspector) open() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return ErrClosed
	}
	return nil
}

// DeadLetterCursor returns the cursor of the page that begins at partition
// p, offset o of the dead-letter topic.
func DeadLetterCursor(p int32, o int64) string {
	return strconv.FormatInt(int64(p), 10) + ":" + strconv.FormatInt(o, 10)
}

// ParseDeadLetterCursor returns the partition and offset a cursor of
// [DeadLetterCursor] names (0, 0 for ""), or [ErrBadCursor].
func ParseDeadLetterCursor(cur string) (int32, int64, error) {
	if cur == "" {
		return 0, 0, nil
	}
	ps, os, ok := strings.Cut(cur, ":")
	p, perr := strconv.ParseInt(ps, 10, 32)
	o, oerr := strconv.ParseInt(os, 10, 64)
	if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
		return 0, 0, fmt.Errorf("%w: %q", ErrBadCursor, cur)
	}
	return int32(p), o, nil
}

// DeadLetterCounts counts records by reason and by type.
func DeadLetterCounts(dls []DeadLetter) (byReason, byType map[string]int) {
	byReason, byType = make(map[string]int), make(map[string]int)
	for _, d := range dls {
		byReason[d.Reason]++
		byType[d.Type]++
	}
	return byReason, byType
}

// Journal is one saga journal as the console and the CLI show it.
type Journal struct {
	Key     string     `json:"key,omitempty"` // the idempotency key (or lease name) it compensates
	Fence   uint64     `json:"fence,string"`
	State   string     `json:"state"`
	Created time.Time  `json:"created"`
	Since   *time.Time `json:"dead_since,omitempty"` // dead-lettered: since when
	// Status is StatusDeadLettered or StatusPending in the list of
	// [Inspector.Compensations]; "" elsewhere.
	Status string        `json:"status,omitempty"`
	Steps  []JournalStep `json:"steps"`
}

// The statuses of a journal that [Inspector.Compensations] lists.
const (
	// StatusDeadLettered: its compensation failed on every attempt; an
	// operator retries it.
	StatusDeadLettered = "dead_lettered"
	// StatusPending: its compensation is due (its lease is lost: a
	// takeover or the recovery sweep will run it), running, or waiting for
	// its next retry.
	StatusPending = "pending"
)

// JournalStep is one step of a [Journal].
type JournalStep struct {
	Step     int    `json:"step"`
	Name     string `json:"name"`
	Handler  string `json:"handler"`
	State    string `json:"state"`
	Done     bool   `json:"done"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
}

// NewJournal returns the shape of j; since is when it was dead-lettered
// (nil: it is not).
func NewJournal(j compensation.JournalInfo, since *time.Time) Journal {
	out := Journal{Fence: j.Ref.Fence, State: string(j.State), Created: j.Created, Since: since,
		Key: DisplayName(j.Ref.Name), Steps: make([]JournalStep, 0, len(j.Steps))}
	for _, s := range j.Steps {
		out.Steps = append(out.Steps, JournalStep{Step: s.Step, Name: s.Name, Handler: s.Handler, State: s.State,
			Done: s.Done, Attempts: s.Attempts, Error: s.Error})
	}
	return out
}

// MaxCompensationPage is the most journals [Inspector.Compensations]
// returns.
const MaxCompensationPage = 1000

// Compensations lists up to limit (at most [MaxCompensationPage]) saga
// journals whose compensation is not settled, in the shape the console and
// the CLI show: the dead-lettered ones, oldest first, then the pending ones
// (Status [StatusPending]: being compensated, or open or sealed with their
// lease lost, so that a takeover or the sweep will compensate them), oldest
// first. A journal whose job still holds its lease is not listed.
func (i *Inspector) Compensations(ctx context.Context, limit int) ([]Journal, error) {
	if limit <= 0 || limit > MaxCompensationPage {
		return nil, fmt.Errorf("inspect: limit %d: want 1 to %d", limit, MaxCompensationPage)
	}
	dls, err := i.DeadCompensations(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Journal, 0, len(dls))
	for _, d := range dls {
		since := d.Since.UTC()
		j := NewJournal(d.JournalInfo, &since)
		j.Status = StatusDeadLettered
		out = append(out, j)
	}
	if len(out) >= limit {
		return out, nil
	}
	return i.pendingCompensations(ctx, out, limit)
}

// pendingCompensations appends to out the pending journals of the recovery
// index, until out holds limit journals.
func (i *Inspector) pendingCompensations(ctx context.Context, out []Journal, limit int) ([]Journal, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return out, err
	}
	idx, err := be.comp.Indexed(ctx, limit)
	if err != nil {
		return out, err
	}
	for _, ij := range idx {
		if len(out) >= limit {
			break
		}
		switch ij.State {
		case compensation.StateCompensating:
		case compensation.StateOpen, compensation.StateSealed:
			l, held, err := i.readLease(ctx, be.m.Key(ij.Ref.Name))
			if err != nil {
				return out, err
			}
			if held && l.Fence == ij.Ref.Fence {
				continue // its job runs
			}
		default:
			continue // settled since it was listed
		}
		j := NewJournal(ij.JournalInfo, nil)
		j.Status = StatusPending
		out = append(out, j)
	}
	return out, nil
}
