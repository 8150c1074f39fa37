package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestForeignHostRefused: a request whose Host is neither a loopback name
// nor allowed (a DNS-rebinding page sends its own name) gets 421 and a
// sentence saying how to allow it, before any data is read; an allowed
// host is served.
func TestForeignHostRefused(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	for _, tc := range []struct {
		allowed []string
		host    string
		want    int
	}{
		{nil, "rebind.evil.example", http.StatusMisdirectedRequest},
		{nil, "rebind.evil.example:8090", http.StatusMisdirectedRequest},
		{nil, "localhost", http.StatusOK},
		{nil, "127.0.0.1:8090", http.StatusOK},
		{[]string{"ops.example"}, "ops.example:8090", http.StatusOK},
		{[]string{"ops.example"}, "ops.example.", http.StatusOK},
		{[]string{"ops.example:443"}, "ops.example:8090", http.StatusMisdirectedRequest},
		{[]string{"ops.example:443"}, "ops.example:443", http.StatusOK},
		{[]string{"*"}, "anything.example", http.StatusOK},
	} {
		srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, AllowedHosts: tc.allowed})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/session", nil)
		req.Host = tc.host
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 512)
		n, _ := resp.Body.Read(b)
		_ = resp.Body.Close()
		body := string(b[:n])
		if resp.StatusCode != tc.want {
			t.Errorf("allowed %v, Host %s: %d %s, want %d", tc.allowed, tc.host, resp.StatusCode, body, tc.want)
		}
		if resp.StatusCode == http.StatusMisdirectedRequest && !strings.Contains(body, "LEASEHOLD_UI_ALLOWED_HOSTS") {
			t.Errorf("Host %s refused with %q: want the way to allow it", tc.host, body)
		}
	}
}
