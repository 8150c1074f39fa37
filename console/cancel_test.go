package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestCancelActionRefusesUnknownKey: the cancel action runs the
// Inspector's Cancel; a key with no record is refused (409) with the reason.
func TestCancelActionRefusesUnknownKey(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, Actions: true, Auth: console.Auth{Token: "tok"}})
	c := newClient(t, srv)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/api/login", strings.NewReader(`{"token":"tok"}`))
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var login struct{ CSRF string }
	_ = json.NewDecoder(resp.Body).Decode(&login)
	_ = resp.Body.Close()
	csrf := map[string]string{"X-CSRF-Token": login.CSRF}
	code, body := c.do("POST", "/api/actions/cancel", `{"key":"nobody","reason":"test"}`, csrf)
	if code != http.StatusConflict || !strings.Contains(body, "no record of the key") {
		t.Fatalf("cancel of an unknown key: %d %s, want 409 no record", code, body)
	}
}

// TestOverviewShowsPausedTypes: a type paused through the Inspector is
// listed in the overview.
func TestOverviewShowsPausedTypes(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	in := inspect.New(rdb, inspect.WithPrefix(prefix))
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	if err := in.Pause(t.Context(), "video.transcode"); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix})
	c := newClient(t, srv)
	if code, body := c.do("GET", "/api/overview", "", nil); code != 200 || !strings.Contains(body, `"paused":["video.transcode"]`) {
		t.Fatalf("overview: %d %s, want the paused type", code, body)
	}
}
