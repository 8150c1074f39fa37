package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUICommand: `worker ui` serves the console on --listen, read-only by
// default (actions answer 403), and refuses --actions without credentials
// in the environment (exit 2).
func TestUICommand(t *testing.T) {
	t.Parallel()
	url, prefix, _ := sharedRedisURL(t)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	r := run(context.Background(), t, env, "ui", "--listen", "127.0.0.1:0", "--actions")
	wantFailure(t, r, 2, "LEASEHOLD_UI_TOKEN")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"ui", "--listen", "127.0.0.1:0", "--allowed-hosts", "console.test, ops.test:1"}, &Env{Stdout: &out, Stderr: &errb,
			Getenv: func(k string) string { return env[k] }})
	}()
	re := regexp.MustCompile(`console on (http://[0-9.:]+/) \(read-only`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no listen address printed: stdout %q stderr %q", out.String(), errb.String())
		}
	}
	host := ""
	get := func(method, path string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(`{"key":"k"}`))
		req.Header.Set("Content-Type", "application/json")
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("GET", ""); code != 200 || !strings.Contains(body, "leasehold console") {
		t.Errorf("page: %d %.200s", code, body)
	}
	if code, body := get("GET", "api/session"); code != 200 || !strings.Contains(body, `"actions":false`) {
		t.Errorf("session: %d %s", code, body)
	}
	if code, _ := get("POST", "api/actions/expire"); code != http.StatusForbidden {
		t.Errorf("action on a read-only console: %d, want 403", code)
	}
	// Only the listen address, localhost and the allowed hosts are answered
	// (a DNS-rebinding page sends its own name).
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/"))
	for h, want := range map[string]int{"evil.test": 421, "evil.test:" + port: 421, "ops.test:2": 421, "console.test.evil.test": 421,
		"console.test": 200, "CONSOLE.test:" + port: 200, "ops.test:1": 200, "localhost:" + port: 200, "[::1]:" + port: 200} {
		host = h
		code, body := get("GET", "api/jobs")
		if code == 421 && !strings.Contains(body, "--allowed-hosts") {
			t.Errorf("Host %s: %d %q: want a sentence naming --allowed-hosts", h, code, body)
		}
		if (code == 421) != (want == 421) {
			t.Errorf("Host %s: %d %.100s, want %d", h, code, body, want)
		}
	}
	host = ""
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d, stderr %q", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker ui did not stop")
	}
}
