package console_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
)

const chromiumPath = "/usr/bin/chromium"

// browser starts headless Chromium (Debian's) for the test; a missing
// chromium fails the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	testkit.SkipShort(t, "a browser")
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("browser tests need Debian's chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser; no timeout on this first call
		t.Fatalf("start chromium %s: %v", chromiumPath, err)
	}
	return ctx
}

// run runs steps in the page, each call bounded to 20s.
func run(ctx context.Context, t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, steps...); err != nil {
		t.Fatalf("%s: %v\npage: %.3000s", what, err, pageHTML(ctx))
	}
}

func pageHTML(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	html, _ := chromedp.Run(cctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	return html
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](ctx context.Context, t *testing.T, js string) T {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(cctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// noNode is what textOf returns when nothing matches.
const noNode = "\x00none"

func textOf(ctx context.Context, t *testing.T, sel string) string {
	return eval[string](ctx, t, `(() => { const e = document.querySelector(`+jsString(sel)+`); return e ? e.textContent : `+jsString(noNode)+` })()`)
}

// waitText waits until the text of the first node matching sel satisfies ok.
func waitText(ctx context.Context, t *testing.T, what, sel string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := textOf(ctx, t, sel)
		if s != noNode && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%s; last text %q)\nmain: %.6000s", what, sel, s,
				eval[string](ctx, t, `document.querySelector("main").innerText + "\\n" + document.querySelector("footer").innerText`))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// click clicks the first element matching sel with a DOM click in the page
// (atomic: the page re-renders its tables at every poll).
func click(ctx context.Context, t *testing.T, what, sel string) {
	t.Helper()
	if !eval[bool](ctx, t, `(() => { const e = document.querySelector(`+jsString(sel)+`); if (!e) return false; e.click(); return true })()`) {
		t.Fatalf("%s: nothing matches %s", what, sel)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func screenshot(ctx context.Context, t *testing.T, dir, name string) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(cctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// real worker: a long job shows up in Running jobs with its lease counting
// down and its heartbeat details moving; signed in, an expire on its key
// page makes its lease lost, its saga step compensated, and the key taken
// over; a dead-lettered job is reset and replayed from the Dead letters view
// and runs. Neither the auth token nor an owner token reaches the page.
func TestConsoleInBrowser(t *testing.T) {
	wd := setup(t)
	const token = "s3cret-token-for-the-test"
	c, err := console.New(console.Config{Redis: wd.rdb, KeyPrefix: wd.prefix, Topics: []string{wd.topic}, DLQ: wd.dlq,
		Group: wd.group, Worker: wd.w, Compensations: wd.reg, JaegerURL: "http://jaeger.test:16686",
		Actions: true, Auth: console.Auth{Token: token}, PollInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	shots := screenshotDir(t)

	wd.enqueue(t, leasehold.NewJob{Type: "test.long", Key: "video-7", Payload: []byte(`{"file":"a.mp4"}`)},
		leasehold.NewJob{Type: "test.pay", Key: "pay-1", Payload: []byte(`{"amount":5}`)})
	testkit.Eventually(t, 20*time.Second, "the long job to start and the payment to be dead-lettered", func() bool {
		return wd.longStarted.Load() == 1 && wd.w.Stats().DeadLettered == 1
	})
	held, err := wd.rdb.Get(context.Background(), wd.prefix+"lease:"+leaseName(t, wd, "video-7")).Result()
	ownerToken, _, _ := strings.Cut(held, " ") // "<token> <fence> <ttl ms>"
	if err != nil || ownerToken == "" {
		t.Fatalf("read the owner token of video-7: %q %v", ownerToken, err)
	}

	ctx := browser(t)

	// Running jobs: the long job, its countdown moving, its heartbeat details.
	run(ctx, t, "open running jobs", chromedp.Navigate(srv.URL+"/#jobs"))
	row := `#jobs tr[data-key="video-7"]`
	c1 := waitText(ctx, t, "the lease countdown", row+` .countdown`, func(s string) bool { return strings.HasSuffix(s, "s") })
	waitText(ctx, t, "the countdown to move", row+` .countdown`, func(s string) bool { return s != c1 })
	d1 := waitText(ctx, t, "heartbeat details", row+` .details`, func(s string) bool { return strings.HasPrefix(s, "transcoded ") })
	waitText(ctx, t, "heartbeat details to move", row+` .details`, func(s string) bool { return s != d1 && strings.Contains(s, "<b>&</b>") })
	waitText(ctx, t, "the owner digest", row+` .owner`, func(s string) bool { return s == leasehold.OwnerDigest(ownerToken) })
	waitText(ctx, t, "the job type from the worker", row+` td:nth-child(2)`, func(s string) bool { return s == "test.long" })
	href := eval[string](ctx, t, `document.querySelector(`+jsString(row+` a.trace`)+`).getAttribute("href")`)
	// The search names the key as the spans record it (hashed by default),
	// never the key itself, which the spans do not carry.
	hashed, _ := (*tracing.Tracer)(nil).KeyAttribute("video-7")
	if !strings.HasPrefix(href, "http://jaeger.test:16686/search?") || !strings.Contains(href, url.QueryEscape(hashed)) ||
		strings.Contains(href, "video-7") {
		t.Errorf("trace link %q: want a Jaeger search for video-7's key attribute %q", href, hashed)
	}
	screenshot(ctx, t, shots, "jobs.png")

	run(ctx, t, "open overview", chromedp.Navigate(srv.URL+"/#overview"))
	waitText(ctx, t, "leases held", `#card-leases .n`, func(s string) bool { return s == "1" })
	waitText(ctx, t, "a rate", `#rates tr[data-outcome="claim_acquired"] td:nth-child(2)`, func(s string) bool { return strings.Contains(s, ".") })
	screenshot(ctx, t, shots, "overview.png")

	// Read-only until signed in: no action buttons.
	run(ctx, t, "open the key", chromedp.Navigate(srv.URL+"/#key/video-7"))
	waitText(ctx, t, "the saga step", `#key-view tr[data-step="reserve"] .step-state`, func(s string) bool { return s == "intent" || s == "done" })
	if buttons := eval[int](ctx, t, `document.querySelectorAll("#key-view button[data-action]").length`); buttons != 0 {
		t.Fatalf("%d action buttons before signing in", buttons)
	}
	run(ctx, t, "sign in", chromedp.SetValue(chromedp.ID("login-token"), token))
	click(ctx, t, "sign in", `#login button[type="submit"]`)
	waitText(ctx, t, "signed in", "#signed-in", func(s string) bool { return strings.Contains(s, "token") })
	waitText(ctx, t, "the expire button", `#key-view button[data-action="expire"]`, func(s string) bool { return s != "" })
	screenshot(ctx, t, shots, "key.png")

	click(ctx, t, "expire", `#key-view button[data-action="expire"]`)
	waitText(ctx, t, "the expire answer", "#flash", func(s string) bool { return strings.Contains(s, "expired the lease of video-7") })
	testkit.Eventually(t, 20*time.Second, "the lease lost and the step compensated", func() bool {
		return wd.w.Stats().LeasesLost == 1 && wd.undone.Load() == 1
	})
	waitText(ctx, t, "the journal compensated on the page", `#key-view .journal-head`, func(s string) bool { return strings.Contains(s, "done") })
	waitText(ctx, t, "the takeover completed", `#key-view .state-COMPLETED`, func(s string) bool { return s == "COMPLETED" })
	screenshot(ctx, t, shots, "key-compensated.png")

	// Dead letters: reset the failed key, replay its record; the job runs.
	wd.fixed.Store(true)
	run(ctx, t, "open dead letters", chromedp.Navigate(srv.URL+"/#deadletters"))
	dl := `#dlq tr[data-key="pay-1"]`
	waitText(ctx, t, "the dead letter", dl+` td:nth-child(4)`, func(s string) bool { return s == "permanent-failure" })
	screenshot(ctx, t, shots, "deadletters.png")
	click(ctx, t, "replay before reset", dl+` button[data-action="replay"]`)
	waitText(ctx, t, "replay refused until reset", "#flash", func(s string) bool { return strings.Contains(s, "reset it first") })
	click(ctx, t, "reset", dl+` button[data-action="reset"]`)
	waitText(ctx, t, "the reset answer", "#flash", func(s string) bool { return strings.Contains(s, "forgot the FAILED record of pay-1") })
	waitText(ctx, t, "the replay button back", dl+` button[data-action="replay"]`, func(s string) bool { return s != "" })
	click(ctx, t, "replay", dl+` button[data-action="replay"]`)
	waitText(ctx, t, "the replay answer", "#flash", func(s string) bool { return strings.Contains(s, "1 of 1 dead-letter records of pay-1 replayed") })
	testkit.Eventually(t, 20*time.Second, "the replayed job to run", func() bool { return wd.paid.Load() == 1 })
	waitText(ctx, t, "the replay marker", dl+` td.replay`, func(s string) bool { return s == "done" })

	run(ctx, t, "open compensations", chromedp.Navigate(srv.URL+"/#compensations"))
	waitText(ctx, t, "no dead-lettered compensation", "#comp-none", func(s string) bool { return s != "" })

	// No secret on the page, whatever the view.
	for _, v := range []string{"overview", "jobs", "key/video-7", "compensations", "deadletters"} {
		run(ctx, t, "read "+v, chromedp.Navigate(srv.URL+"/#"+v), chromedp.Sleep(700*time.Millisecond))
		html := pageHTML(ctx)
		if strings.Contains(html, token) || strings.Contains(html, ownerToken) {
			t.Errorf("view %s shows a secret (the auth token or an owner token)", v)
		}
	}
}

// TestConsoleDeadLettersOpenedDirectly: the dead-letter view opened by its
// URL, as the first page of a visit, shows the dead letters at once, not
// after five poll intervals (the page counted from its load, not from its
// first dead-letter load).
func TestConsoleDeadLettersOpenedDirectly(t *testing.T) {
	wd := setup(t)
	c, err := console.New(console.Config{Redis: wd.rdb, KeyPrefix: wd.prefix, Topics: []string{wd.topic}, DLQ: wd.dlq,
		Group: wd.group, Worker: wd.w, Compensations: wd.reg, PollInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	wd.enqueue(t, leasehold.NewJob{Type: "test.pay", Key: "pay-1", Payload: []byte(`{"amount":5}`)})
	testkit.Eventually(t, 20*time.Second, "the payment dead-lettered", func() bool { return wd.w.Stats().DeadLettered == 1 })

	ctx := browser(t)
	run(ctx, t, "open dead letters", chromedp.Navigate(srv.URL+"/#deadletters"))
	// waitText waits 20 s: less than five 10 s poll intervals.
	waitText(ctx, t, "the dead letter", `#dlq tr[data-key="pay-1"] td:nth-child(4)`, func(s string) bool { return s == "permanent-failure" })
}

// The dead-letter view pages through a topic read a bounded part at a time:
// with a bound of one record a request, the first page shows one dead letter
// and says the read stopped at its bound, and Next page reads on to the other.
func TestConsoleDeadLettersPagedInBrowser(t *testing.T) {
	wd := setup(t)
	c, err := console.New(console.Config{Redis: wd.rdb, KeyPrefix: wd.prefix, Topics: []string{wd.topic}, DLQ: wd.dlq,
		Group: wd.group, Worker: wd.w, Compensations: wd.reg, PollInterval: 10 * time.Second, DeadLetterScan: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	for _, k := range []string{"pay-1", "pay-2"} {
		wd.enqueue(t, leasehold.NewJob{Type: "test.pay", Key: k, Payload: []byte(`{"amount":5}`)})
	}
	testkit.Eventually(t, 20*time.Second, "both payments dead-lettered", func() bool { return wd.w.Stats().DeadLettered == 2 })

	ctx := browser(t)
	run(ctx, t, "open dead letters", chromedp.Navigate(srv.URL+"/#deadletters"))
	waitText(ctx, t, "the first page", `#dlq-page`, func(s string) bool { return strings.Contains(s, "page 1,") && strings.Contains(s, "its bound") })
	first := eval[string](ctx, t, `document.querySelector("#dlq tr[data-key]").dataset.key`)
	click(ctx, t, "next page", `#dlq-next`)
	waitText(ctx, t, "the second page", `#dlq-page`, func(s string) bool { return strings.HasPrefix(s, "page 2") })
	second := eval[string](ctx, t, `document.querySelector("#dlq tr[data-key]").dataset.key`)
	if first == second || (first != "pay-1" && first != "pay-2") || (second != "pay-1" && second != "pay-2") {
		t.Fatalf("pages showed %q then %q, want pay-1 and pay-2 one on each", first, second)
	}
}
