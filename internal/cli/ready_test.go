package cli

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestReadyzWhileRedisHangs: with the worker's Redis paused (SIGSTOP: it
// takes connections and answers nothing), /readyz answers within a second,
// says not ready and why, and says ready again once Redis answers; the log
// says what the checks saw.
func TestReadyzWhileRedisHangs(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedis(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "cli-ready", 1)
	k.CreateTopic(t, topic+".dlq", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"run", "--brokers", strings.Join(k.Brokers(), ","), "--topics", topic,
			"--group", "g-" + topic, "--redis", "redis://" + rs.Addr(), "--http", "127.0.0.1:0", "--lease-ttl", "2s"},
			&Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	}()
	addr := waitLine(t, &errb, regexp.MustCompile(`http listening" addr=(\S+)`))
	hc := &http.Client{Timeout: time.Second} // the answer must come within a second
	t.Cleanup(hc.CloseIdleConnections)
	var slowest time.Duration // of the answers while Redis hangs
	paused := false
	readyz := func() (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if took := time.Since(start); paused && took > slowest {
			slowest = took
		}
		return resp.StatusCode, string(b), nil
	}
	testkit.Eventually(t, 30*time.Second, "ready", func() bool { code, _, _ := readyz(); return code == http.StatusOK })

	rs.Pause()
	paused = true
	resumed := false
	defer func() {
		if !resumed {
			rs.Resume()
		}
	}()
	var notReady string
	answers := 0
	tick := time.NewTicker(100 * time.Millisecond) // asks as a probe does, only more often
	defer tick.Stop()
	giveUp := time.Now().Add(15 * time.Second)
	for i := 0; notReady == "" || i < 20; i++ { // two seconds of answers at least
		<-tick.C
		code, body, err := readyz()
		if err != nil {
			t.Fatalf("/readyz while Redis hangs, answer %d: %v", i, err)
		}
		answers++
		if code == http.StatusServiceUnavailable {
			notReady = body
		}
		if time.Now().After(giveUp) {
			t.Fatalf("/readyz still says %d %q 15s after Redis was paused", code, body)
		}
	}
	paused = false
	t.Logf("readyz_answers_redis_paused=%d slowest=%.3f s first_not_ready=%q", answers, slowest.Seconds(), strings.TrimSpace(notReady))
	if !strings.Contains(notReady, "not ready") {
		t.Errorf("answer while Redis hangs: %q", notReady)
	}
	rs.Resume()
	resumed = true
	testkit.Eventually(t, 30*time.Second, "ready again", func() bool { code, _, _ := readyz(); return code == http.StatusOK })
	testkit.Eventually(t, 10*time.Second, "the log saying it", func() bool { return strings.Contains(errb.String(), "ready again") })
	if !strings.Contains(errb.String(), `msg="not ready"`) {
		t.Errorf("no \"not ready\" line in the log:\n%s", errb.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("worker run did not stop")
	}
}
