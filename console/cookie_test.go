package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestSessionCookieSecure: behind a TLS-terminating proxy the console sees
// plain HTTP. Its session cookie is Secure there with Config.SecureCookie
// (at sign-in and sign-out), and only then: an X-Forwarded-Proto header,
// which any client can send, changes nothing. Over TLS it is Secure anyway.
func TestSessionCookieSecure(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	cookie := func(srv *httptest.Server, hc *http.Client, path string) *http.Cookie {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+path, strings.NewReader(`{"token":"tok"}`))
		req.Host = "ops.example"
		req.Header.Set("Origin", "https://ops.example")
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if ck := resp.Cookies(); resp.StatusCode == http.StatusOK && len(ck) == 1 {
			return ck[0]
		}
		t.Fatalf("POST %s: %d %v", path, resp.StatusCode, resp.Cookies())
		return nil
	}
	cfg := console.Config{Redis: rdb, KeyPrefix: prefix, Actions: true, Auth: console.Auth{Token: "tok"}, AllowedHosts: []string{"ops.example"}}
	srv := newServer(t, cfg)
	if ck := cookie(srv, srv.Client(), "/api/login"); ck.Secure {
		t.Errorf("plain HTTP, X-Forwarded-Proto https, no SecureCookie: cookie %v is Secure; the header must not be trusted", ck)
	}
	cfg.SecureCookie = true
	srv = newServer(t, cfg)
	for _, path := range []string{"/api/login", "/api/logout"} {
		if ck := cookie(srv, srv.Client(), path); !ck.Secure {
			t.Errorf("SecureCookie: %s cookie %v is not Secure", path, ck)
		}
	}
	cfg.SecureCookie = false
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	tls := httptest.NewTLSServer(c)
	t.Cleanup(tls.Close)
	if ck := cookie(tls, tls.Client(), "/api/login"); !ck.Secure {
		t.Errorf("over TLS: cookie %v is not Secure", ck)
	}
}
