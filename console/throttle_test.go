package console_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestSignInThrottled: 100 parallel wrong guesses from one address are
// refused 429 with Retry-After past a handful, before their credentials are
// compared; the right token is refused too while the address is throttled.
func TestSignInThrottled(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, Actions: true, Auth: console.Auth{Token: "right-token"}})
	hc := srv.Client()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		retry    []string
	)
	start := time.Now()
	for i := range 100 {
		wg.Go(func() {
			body := `{"token":"guess-` + strconv.Itoa(i) + `"}`
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/api/login", strings.NewReader(body))
			resp, err := hc.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests {
				retry = append(retry, resp.Header.Get("Retry-After"))
			}
		})
	}
	wg.Wait()
	t.Logf("signin_guesses=100 compared_401=%d refused_429=%d took=%.3f s", statuses[http.StatusUnauthorized],
		statuses[http.StatusTooManyRequests], time.Since(start).Seconds())
	if statuses[http.StatusUnauthorized] > 5 || statuses[http.StatusTooManyRequests] < 95 {
		t.Errorf("100 parallel wrong guesses: %v; want at most 5 compared (401), the rest 429", statuses)
	}
	for _, ra := range retry {
		if n, err := strconv.Atoi(ra); err != nil || n < 1 {
			t.Errorf("429 with Retry-After %q: want a number of seconds", ra)
			break
		}
	}
	c := newClient(t, srv)
	if code, body := c.do("POST", "/api/login", `{"token":"right-token"}`, nil); code != http.StatusTooManyRequests || !strings.Contains(body, "try again in") {
		t.Errorf("the right token while throttled: %d %s, want 429 saying when to try again", code, body)
	}
}
