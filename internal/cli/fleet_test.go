package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fleet"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestFleet: two `worker run` publish themselves; `worker fleet` lists
// both with their group, topics and concurrency, and the jobs they ran;
// one stops and is gone from the next listing. (A killed worker expiring
// is TestPublishListStopExpire in internal/fleet.)
func TestFleet(t *testing.T) {
	t.Parallel()
	url, prefix, _ := sharedRedisURL(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "cli-fleet", 2)
	k.CreateTopic(t, topic+".dlq", 1)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	start := func(conc string) (stop func() int) {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, []string{"run", "--brokers", strings.Join(k.Brokers(), ","), "--topics", topic,
				"--group", "g-" + topic, "--prefix", prefix, "--lease-ttl", "3s", "--concurrency", conc,
				"--heartbeat-interval", "500ms", "--fetch-max-wait", "250ms"},
				&Env{Stdout: &out, Stderr: &errb, Getenv: func(n string) string { return env[n] }})
		}()
		stopped := false
		stop = func() int {
			if stopped {
				return 0
			}
			stopped = true
			cancel()
			return <-done
		}
		t.Cleanup(func() { stop() })
		return stop
	}
	ctx := t.Context()
	list := func() fleet.View {
		t.Helper()
		r := run(ctx, t, env, "fleet", "--json")
		var v fleet.View
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
			t.Fatalf("fleet --json: %+v", r)
		}
		return v
	}
	stopA := start("3")
	start("5")
	testkit.Progressing(t, 30*time.Second, "both workers listed", func() (int, bool) {
		n := len(list().Workers)
		return n, n == 2
	})
	v := list()
	for _, w := range v.Workers {
		if w.Group != "g-"+topic || len(w.Topics) != 1 || w.Topics[0] != topic || (w.Concurrency != 3 && w.Concurrency != 5) ||
			w.PID == 0 || w.Version == "" || w.IntervalMS != 1000 {
			t.Errorf("worker %+v: want its group, topic, concurrency, pid, version and a 1s interval", w.Status)
		}
	}
	if r := run(ctx, t, nil, "enqueue", "--brokers", strings.Join(k.Brokers(), ","), "--topics", topic,
		"--count", "10", "--sleep", "10ms", "--progress=false"); r.code != 0 {
		t.Fatalf("enqueue: %+v", r)
	}
	testkit.Eventually(t, 30*time.Second, "the fleet counts the 10 jobs", func() bool { return list().Counters.Succeeded == 10 })
	r := run(ctx, t, env, "fleet")
	if r.code != 0 || !strings.Contains(r.stdout, "2 workers") || !strings.Contains(r.stdout, "g-"+topic) {
		t.Errorf("fleet: %+v", r)
	}

	if code := stopA(); code != 0 {
		t.Fatalf("worker a exit %d", code)
	}
	if v := list(); len(v.Workers) != 1 || v.Workers[0].Concurrency != 5 {
		t.Fatalf("after a stopped: %+v, want the worker of concurrency 5 alone", v.Workers)
	}
}
