package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
)

// demoView is the demo's terminal view: on a terminal it redraws the screen
// (plain ANSI) with the running jobs and their heartbeat progress; elsewhere
// it prints one line per event.
type demoView struct {
	w     io.Writer
	tty   bool
	size  func() (cols, rows int) // the terminal's, read at every redraw
	start time.Time

	mu        sync.Mutex
	workers   []viewWorker
	jobs      int
	dups      int
	lostKey   string
	retryKey  string
	completed map[string]bool
	replays   int
	held      int
	retries   int
	lost      int
	takeovers int
	dead      int
	comps     int
	events    []string // recent events (terminal) or pending lines (plain)
}

type viewWorker struct {
	name string
	w    *leasehold.Worker
}

// newDemoView draws on w; getenv reads $COLUMNS and $LINES, the size used
// where the terminal's cannot be read.
func newDemoView(w io.Writer, plain bool, getenv func(string) string) *demoView {
	v := &demoView{w: w, start: time.Now(), completed: map[string]bool{}}
	f, ok := w.(*os.File)
	if ok && !plain {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			v.tty = true
		}
	}
	v.size = func() (int, int) {
		if ok {
			if c, r := termSize(f); c > 0 && r > 0 {
				return c, r
			}
		}
		c, _ := strconv.Atoi(getenv("COLUMNS"))
		r, _ := strconv.Atoi(getenv("LINES"))
		return cmp.Or(max(c, 0), 80), cmp.Or(max(r, 0), 24)
	}
	return v
}

func (v *demoView) setPlan(jobs, dups int, lostKey, retryKey string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.jobs, v.dups, v.lostKey, v.retryKey = jobs, dups, lostKey, retryKey
}

func (v *demoView) addWorker(name string, w *leasehold.Worker) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.workers = append(v.workers, viewWorker{name, w})
}

// note records an event line.
func (v *demoView) note(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.event(fmt.Sprintf(format, args...))
}

// event must be called with v.mu held.
func (v *demoView) event(s string) {
	line := fmt.Sprintf("%5.1fs  %s", time.Since(v.start).Seconds(), s)
	v.events = append(v.events, line)
	if v.tty && len(v.events) > 12 {
		v.events = v.events[len(v.events)-12:]
	}
}

// hooks returns the hooks of one worker, feeding the view.
func (v *demoView) hooks(worker string) leasehold.Hooks {
	return leasehold.Hooks{
		OnClaim: func(_ context.Context, info leasehold.ClaimInfo) {
			if info.Outcome != leasehold.OutcomeTakeover {
				return
			}
			v.mu.Lock()
			defer v.mu.Unlock()
			v.takeovers++
			v.event(fmt.Sprintf("%s takes over %s with fence %d (attempt %d)", worker, info.Key, info.Fence, info.Attempt))
		},
		OnStart: func(_ context.Context, j *leasehold.Job) {
			if j.Attempt == 1 && !j.Takeover {
				return
			}
			v.mu.Lock()
			defer v.mu.Unlock()
			from := "the start"
			if p, ok := parseProgress(j.LastHeartbeat()); ok {
				from = fmt.Sprintf("step %d/%d (last heartbeat)", p.Step, p.Steps)
			}
			v.event(fmt.Sprintf("%s runs %s again, attempt %d, resuming from %s", worker, j.Key, j.Attempt, from))
		},
		OnDone: func(_ context.Context, j *leasehold.Job, _ []byte, err error) {
			v.mu.Lock()
			defer v.mu.Unlock()
			if err == nil {
				v.completed[j.Key] = true
				if !v.tty {
					v.event(fmt.Sprintf("%s completed %s (fence %d)", worker, j.Key, j.Fence()))
				}
			}
		},
		OnReplay: v.onReplay(worker),
		OnHeld:   v.onHeld(worker),
		OnRetry: func(_ context.Context, info leasehold.ClaimInfo, delay time.Duration, err error) {
			v.mu.Lock()
			defer v.mu.Unlock()
			if errors.Is(err, leasehold.ErrLeaseLost) {
				v.event(fmt.Sprintf("%s: claims %s again in %v (a takeover, or a replay if another worker finished it)", worker, info.Key, delay.Round(time.Millisecond)))
				return
			}
			v.retries++
			v.event(fmt.Sprintf("%s: %s failed (%s): retry in %v", worker, info.Key, truncate(err.Error(), 50), delay.Round(time.Millisecond)))
		},
		OnLeaseLost: func(_ context.Context, j *leasehold.Job, err error) {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.lost++
			v.event(fmt.Sprintf("%s LOST the lease of %s (fence %d): %s; handler cancelled", worker, j.Key, j.Fence(), truncate(err.Error(), 60)))
		},
		OnDeadLetter: func(_ context.Context, info leasehold.ClaimInfo, reason string, _ error) {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.dead++
			v.event(fmt.Sprintf("%s: dead-lettered offset %d (%s)", worker, info.Offset, reason))
		},
	}
}

// onReplay counts and shows a duplicate answered from its record.
func (v *demoView) onReplay(worker string) func(context.Context, leasehold.ClaimInfo, []byte, string) {
	return func(_ context.Context, info leasehold.ClaimInfo, result []byte, failure string) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.replays++
		what := "result " + string(result)
		if failure != "" {
			what = "failure " + failure
		}
		v.event(fmt.Sprintf("%s: duplicate of %s (offset %d) replayed: %s", worker, info.Key, info.Offset, truncate(what, 60)))
	}
}

// onHeld counts a record parked behind its key's running attempt, and shows
// the first few.
func (v *demoView) onHeld(worker string) func(context.Context, leasehold.ClaimInfo, time.Duration) {
	return func(_ context.Context, info leasehold.ClaimInfo, delay time.Duration) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.held++
		if v.held <= 6 || !v.tty {
			v.event(fmt.Sprintf("%s: %s is held by another attempt: parked %v, offset %d not committed", worker, info.Key, delay.Round(time.Millisecond), info.Offset))
		}
	}
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func parseProgress(b []byte) (SleepProgress, bool) {
	var p SleepProgress
	if b == nil || json.Unmarshal(b, &p) != nil || p.Steps <= 0 {
		return p, false
	}
	return p, true
}

// released records a compensation of demo.sleep's reserve step.
func (v *demoView) released(ctx context.Context, a ReleaseArgs) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.comps++
	why := ""
	if s, ok := compensation.StepFromContext(ctx); ok && s.InDoubt {
		why = " (in doubt)"
	}
	v.event(fmt.Sprintf("compensated: step reserve of %s (fence %d) undone%s", a.Key, a.Fence, why))
}

func (v *demoView) completedCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.completed)
}

// finished reports whether every job completed, every duplicate was
// replayed, the poison record was dead-lettered and nothing is in flight.
func (v *demoView) finished() bool {
	v.mu.Lock()
	done := len(v.completed) >= v.jobs && v.replays >= v.dups && v.dead >= 1
	ws := append([]viewWorker(nil), v.workers...)
	v.mu.Unlock()
	if !done {
		return false
	}
	for _, w := range ws {
		if s := w.w.Stats(); s.InFlight > 0 || s.Parked > 0 {
			return false
		}
	}
	return true
}

// draw redraws the screen (terminal) or prints pending event lines.
func (v *demoView) draw() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.tty {
		for _, l := range v.events {
			_, _ = fmt.Fprintln(v.w, l)
		}
		v.events = v.events[:0]
		return
	}
	var s screen
	s.header = []string{
		fmt.Sprintf("leasehold demo  %5.1fs   jobs %d/%d done   duplicates replayed %d/%d   held waits %d",
			time.Since(v.start).Seconds(), len(v.completed), v.jobs, v.replays, v.dups, v.held),
		fmt.Sprintf("retries %d   leases lost %d   takeovers %d   compensated %d   dead-lettered %d",
			v.retries, v.lost, v.takeovers, v.comps, v.dead),
	}
	type row struct {
		worker string
		j      leasehold.RunningJob
	}
	var rows []row
	for _, w := range v.workers {
		for _, j := range w.w.Running() {
			rows = append(rows, row{w.name, j})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].j.Key < rows[j].j.Key })
	s.table = fmt.Sprintf("  %-6s %-18s %-6s %-18s %-22s", "WORKER", "KEY", "ATT", "FENCE", "PROGRESS")
	for _, r := range rows {
		bar := strings.Repeat(".", 20)
		pct := ""
		if p, ok := parseProgress(r.j.Progress); ok {
			n := min(p.Step*20/p.Steps, 20)
			bar = strings.Repeat("#", n) + strings.Repeat(".", 20-n)
			pct = fmt.Sprintf("%d/%d", p.Step, p.Steps)
		}
		mark := ""
		switch r.j.Key {
		case v.lostKey:
			mark = "  <- its lease will be expired"
			if r.j.Takeover {
				mark = "  <- taken over, resumed"
			}
		case v.retryKey:
			mark = "  <- fails once at step 4"
		}
		s.rows = append(s.rows, fmt.Sprintf("  %-6s %-18s %-6d %-18d [%s] %-6s%s", r.worker, r.j.Key, r.j.Attempt, r.j.Fence, bar, pct, mark))
	}
	for _, l := range v.events {
		s.events = append(s.events, "  "+l)
	}
	cols, lines := v.size()
	_, _ = io.WriteString(v.w, "\x1b[H\x1b[2J"+strings.Join(s.fit(cols, lines), "\n")+"\n")
}

// screen is one redraw of the demo's terminal view.
type screen struct {
	header []string // counts
	table  string   // the running jobs' column names
	rows   []string // a running job each
	events []string // the latest events, oldest first
}

// fit lays the screen out in cols x lines: every line cut to cols-1
// columns (a full line would wrap on some terminals), and at most lines-1
// lines (the last one holds the cursor). The events keep a third of the
// height or more when the running jobs do not fit; the jobs left out are
// counted on a line of their own.
func (s screen) fit(cols, lines int) []string {
	width, height := max(cols-1, 1), max(lines-1, 1)
	out := append([]string(nil), s.header...)
	avail := height - len(out)
	events := min(len(s.events), max(3, avail/3))
	if room := avail - events - 3; room > 0 { // a blank, the column names, a blank
		out = append(out, "", s.table)
		if len(s.rows) <= room {
			out = append(out, s.rows...)
		} else {
			out = append(out, s.rows[:room-1]...)
			out = append(out, fmt.Sprintf("  ... and %d more running", len(s.rows)-(room-1)))
		}
		out = append(out, "")
	}
	events = min(len(s.events), max(height-len(out), 0))
	out = append(out, s.events[len(s.events)-events:]...)
	if len(out) > height {
		out = out[:height]
	}
	for i, l := range out {
		out[i] = cutWidth(l, width)
	}
	return out
}

// cutWidth cuts s to n runes.
func cutWidth(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// totals prints the final counts.
func (v *demoView) totals() {
	v.mu.Lock()
	defer v.mu.Unlock()
	var started, succeeded, dead int64
	for _, w := range v.workers {
		s := w.w.Stats()
		started += s.Started
		succeeded += s.Succeeded
		dead += s.DeadLettered
	}
	_, _ = fmt.Fprintf(v.w, "\ntotals after %.1fs: %d/%d jobs completed exactly once (%d handler runs, %d completions), %d duplicates replayed, %d held waits, %d retries, %d leases lost, %d takeovers, %d steps compensated, %d dead-lettered\n",
		time.Since(v.start).Seconds(), len(v.completed), v.jobs, started, succeeded, v.replays, v.held, v.retries, v.lost, v.takeovers, v.comps, dead)
}
