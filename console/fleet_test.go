package console_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/fleet"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestConsoleStandaloneFleet: a standalone console (no Worker, as `worker
// ui` runs) beside three workers that publish to Redis shows their figures
// (running, takeovers, leases lost, jobs a second by outcome) instead of
// "n/a", and plots the last hour as inline SVG drawn by the page.
func TestConsoleStandaloneFleet(t *testing.T) {
	rdb, prefix := testkit.StartRedis(t).Client(t), "lh:"
	ctx := t.Context()
	now := time.Now()
	for i := range 3 {
		id := "host-" + strconv.Itoa(i) + "/100/x"
		// The hour before: a sample a minute, 2 jobs a second each.
		for m := 30; m >= 1; m-- {
			at := now.Add(-time.Duration(m) * time.Minute)
			s := fleet.Sample{At: at, Load: fleet.Load{Running: 2, LeasesHeld: 2, CommitLag: int64(40 * (m % 6)),
				Counters: fleet.Counters{Succeeded: int64(120 * (30 - m)), Failed: int64(30 - m)}}}
			b, _ := json.Marshal(s)
			if err := rdb.LPush(ctx, prefix+"fleet:s:"+id, b).Err(); err != nil {
				t.Fatal(err)
			}
		}
		p, err := fleet.NewPublisher(fleet.Config{Redis: rdb, Prefix: prefix, Interval: time.Second,
			Identity: fleet.Identity{ID: id, Group: "g", Topics: []string{"jobs"}, Concurrency: 8},
			Load: func() fleet.Load {
				return fleet.Load{Running: 2, LeasesHeld: 2, Counters: fleet.Counters{Succeeded: 3600, Failed: 30, Takeovers: 1, LeasesLost: 1}}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	}
	c, err := console.New(console.Config{Redis: rdb, KeyPrefix: prefix, PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)

	bctx := browser(t)
	run(bctx, t, "open the overview", chromedp.Navigate(srv.URL+"/#overview"))
	waitText(bctx, t, "the fleet's running jobs", `#card-running .n`, func(s string) bool { return s == "6" })
	if got := textOf(bctx, t, `#card-takeovers .l`); got != "takeovers (3 workers)" {
		t.Errorf("takeovers label %q", got)
	}
	waitText(bctx, t, "the fleet's succeeded total", `#rates tr[data-outcome="succeeded"] td:nth-child(3)`,
		func(s string) bool { return s == "10800" })
	if n := eval[int](bctx, t, `document.querySelectorAll("#chart-jobs svg polyline").length`); n != 5 {
		t.Errorf("%d lines in the jobs chart, want 5 (one an outcome)", n)
	}
	if n := eval[int](bctx, t, `document.querySelector("#chart-leases polyline").getAttribute("points").split(" ").length`); n < 30 {
		t.Errorf("%d points in the leases chart, want 30 or more (a minute each)", n)
	}
	// The commit lag of the three workers, summed a minute: up to 3 x 200,
	// and the chart's top is 10% above its highest point.
	if top := textOf(bctx, t, `#chart-lag svg text`); top != "660" {
		t.Errorf("commit lag chart's top %q, want 660 (the three workers' lag summed, 600, plus 10%%)", top)
	}
	run(bctx, t, "a viewport that holds the charts", chromedp.EmulateViewport(1280, 1300))
	screenshot(bctx, t, screenshotDir(t), "overview-fleet.png")
}
