package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func newServer(t *testing.T, cfg console.Config) *httptest.Server {
	t.Helper()
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv
}

type client struct {
	t   *testing.T
	srv *httptest.Server
	hc  *http.Client
}

func newClient(t *testing.T, srv *httptest.Server) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, srv: srv, hc: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
}

// do sends a request and returns the status and body.
func (c *client) do(method, path, body string, hdr map[string]string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, c.srv.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	rdb, _ := testkit.SharedRedis(t)
	for _, tc := range []struct {
		name string
		cfg  console.Config
		want error
	}{
		{"no redis", console.Config{}, console.ErrNoRedis},
		{"actions without auth", console.Config{Redis: rdb, Actions: true}, console.ErrActionsNeedAuth},
		{"user without password", console.Config{Redis: rdb, Auth: console.Auth{User: "ops"}}, console.ErrBadAuth},
		{"token and user", console.Config{Redis: rdb, Auth: console.Auth{Token: "x", User: "ops", Password: "p"}}, console.ErrBadAuth},
	} {
		if _, err := console.New(tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: New = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := console.New(console.Config{Redis: rdb, JaegerURL: "javascript:alert(1)"}); err == nil {
		t.Error("New accepted a javascript: Jaeger URL")
	}
}

// TestReadOnlyByDefault: without Config.Actions every action and the
// sign-in answer 403, whatever the credentials.
func TestReadOnlyByDefault(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, Auth: console.Auth{Token: "tok"}})
	c := newClient(t, srv)
	for _, a := range []string{"expire", "reset", "retry", "replay"} {
		if code, body := c.do("POST", "/api/actions/"+a, `{"key":"k"}`, map[string]string{"Authorization": "Bearer tok"}); code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", a, code, body)
		}
	}
	if code, _ := c.do("POST", "/api/login", `{"token":"tok"}`, nil); code != http.StatusForbidden {
		t.Errorf("login on a read-only console: %d, want 403", code)
	}
	if code, body := c.do("GET", "/api/session", "", nil); code != 200 || !strings.Contains(body, `"actions":false`) {
		t.Errorf("session: %d %s", code, body)
	}
}

// TestActionsNeedSessionAndCSRF: an action needs a signed-in session
// (token or basic credentials, compared in full), its CSRF token in a
// header, a same-origin request, JSON and POST.
func TestActionsNeedSessionAndCSRF(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	for _, auth := range []console.Auth{{Token: "right-token"}, {User: "ops", Password: "right-password"}} {
		srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, Actions: true, Auth: auth})
		c := newClient(t, srv)
		const action = "/api/actions/expire"
		if code, _ := c.do("POST", action, `{"key":"k"}`, nil); code != http.StatusUnauthorized {
			t.Errorf("%+v: action without a session: %d, want 401", auth, code)
		}
		wrong, right := `{"token":"right-toke"}`, `{"token":"right-token"}`
		if auth.User != "" {
			wrong, right = `{"user":"ops","password":"right-passwor"}`, `{"user":"ops","password":"right-password"}`
		}
		if code, _ := c.do("POST", "/api/login", wrong, nil); code != http.StatusUnauthorized {
			t.Errorf("%+v: wrong credentials: %d, want 401", auth, code)
		}
		if code, _ := c.do("POST", "/api/login", right, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
			t.Errorf("%+v: cross-origin login: %d, want 403", auth, code)
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/api/login", strings.NewReader(right))
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var login struct{ CSRF string }
		_ = json.NewDecoder(resp.Body).Decode(&login)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || login.CSRF == "" {
			t.Fatalf("%+v: login: %d", auth, resp.StatusCode)
		}
		ck := resp.Cookies()
		if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
			t.Errorf("%+v: session cookie %+v: want one HttpOnly SameSite=Strict cookie", auth, ck)
		}
		if code, _ := c.do("POST", action, `{"key":"k"}`, nil); code != http.StatusForbidden {
			t.Errorf("%+v: action without the CSRF token: %d, want 403", auth, code)
		}
		if code, _ := c.do("POST", action, `{"key":"k"}`, map[string]string{"X-CSRF-Token": login.CSRF + "x"}); code != http.StatusForbidden {
			t.Errorf("%+v: action with a wrong CSRF token: %d, want 403", auth, code)
		}
		csrf := map[string]string{"X-CSRF-Token": login.CSRF}
		if code, _ := c.do("POST", action, `{"key":"k"}`, map[string]string{"X-CSRF-Token": login.CSRF, "Origin": "http://evil.example"}); code != http.StatusForbidden {
			t.Errorf("%+v: cross-origin action: %d, want 403", auth, code)
		}
		if code, _ := c.do("GET", action, "", csrf); code != http.StatusMethodNotAllowed {
			t.Errorf("%+v: GET action: %d, want 405", auth, code)
		}
		// Through every check: the action runs, and finds no lease (409).
		if code, body := c.do("POST", action, `{"key":"k"}`, csrf); code != http.StatusConflict || !strings.Contains(body, "no lease is held on k") {
			t.Errorf("%+v: action: %d %s, want 409 no lease", auth, code, body)
		}
		if code, body := c.do("GET", "/api/session", "", nil); !strings.Contains(body, `"signed_in":true`) || strings.Contains(body, "right-") {
			t.Errorf("%+v: session %d %s: want signed in, no credentials", auth, code, body)
		}
		if code, _ := c.do("POST", "/api/logout", "", csrf); code != 200 {
			t.Errorf("logout: %d", code)
		}
		if code, _ := c.do("POST", action, `{"key":"k"}`, csrf); code != http.StatusUnauthorized {
			t.Errorf("%+v: action after logout: %d, want 401", auth, code)
		}
	}
}

// TestJobsPagesAndSecrets: 120 leases held are listed over pages of about
// PageSize, each exactly once across the pages, by owner digest only; no
// answer carries an owner token.
func TestJobsPagesAndSecrets(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix), lease.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	const n = 120
	var tokens []string
	for i := range n {
		name := "job-" + strconv.Itoa(i)
		if _, err := m.Acquire(ctx, name); err != nil {
			t.Fatal(err)
		}
		held, err := rdb.Get(ctx, m.Key(name)).Result() // "<token> <fence> <ttl ms>"
		if err != nil {
			t.Fatal(err)
		}
		tok, _, _ := strings.Cut(held, " ")
		tokens = append(tokens, tok)
	}
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, PageSize: 25, Actions: true, Auth: console.Auth{Token: "ui-secret"}})
	c := newClient(t, srv)
	seen := map[string]int{}
	cursor, pages := "", 0
	var bodies []string
	for {
		code, body := c.do("GET", "/api/jobs?cursor="+cursor, "", nil)
		if code != 200 {
			t.Fatalf("jobs: %d %s", code, body)
		}
		bodies = append(bodies, body)
		var p struct {
			Rows []struct{ Key, Owner string }
			Next string
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Rows {
			seen[r.Key]++
			if len(r.Owner) != 8 {
				t.Errorf("owner %q: want an 8-digit digest", r.Owner)
			}
		}
		pages++
		if p.Next == "" {
			break
		}
		cursor = p.Next
		if pages > n {
			t.Fatal("pages never end")
		}
	}
	if len(seen) != n || pages < 2 {
		t.Errorf("%d distinct leases over %d pages, want %d over several", len(seen), pages, n)
	}
	for k, times := range seen {
		if times != 1 {
			t.Errorf("%s listed %d times", k, times)
		}
	}
	for _, p := range []string{"/", "/api/overview", "/api/session", "/api/compensations", "/static/app.js"} {
		code, body := c.do("GET", p, "", nil)
		if code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
		bodies = append(bodies, body)
	}
	for _, b := range bodies {
		if strings.Contains(b, "ui-secret") {
			t.Fatal("an answer carries the auth token")
		}
		for _, tok := range tokens {
			if strings.Contains(b, tok) {
				t.Fatal("an answer carries an owner token")
			}
		}
	}
	if code, body := c.do("GET", "/api/overview", "", nil); code != 200 || !strings.Contains(body, `"leases_held":120`) ||
		!strings.Contains(body, `"fleet":`) {
		t.Errorf("overview: %d %s", code, body)
	}
}
