package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestJobContextAfterRecordedEnd: when an attempt's end is recorded (a
// completion, a retry's release, a terminal failure), the store ends the
// job's lease; that end is not a loss. OnDone's context is still live (for
// a completion and a retry, the job's own), and the handler's context then
// ends with context.Canceled, not with a cause matching ErrLeaseLost. On
// Redis and the embedded Kafka, three job types: one that completes, one
// that fails once and then completes, one that fails for good.
func TestJobContextAfterRecordedEnd(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	type done struct {
		key     string
		attempt int
		ctxErr  error
		cause   error
	}
	dones := make(chan done, 16)
	var mu sync.Mutex
	ctxs := map[string]context.Context{} // key/attempt -> the handler's context
	keep := func(ctx context.Context, j *Job) {
		mu.Lock()
		ctxs[fmt.Sprintf("%s/%d", j.Key, j.Attempt)] = ctx
		mu.Unlock()
	}
	hooks := Hooks{OnDone: func(ctx context.Context, j *Job, _ []byte, _ error) {
		dones <- done{key: j.Key, attempt: j.Attempt, ctxErr: ctx.Err(), cause: context.Cause(j.ctx)} //nolint:contextcheck // the job's own context is what is checked
	}}
	h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.ok", func(ctx context.Context, j *Job) ([]byte, error) {
			keep(ctx, j)
			return []byte("ok"), nil
		}))
		must(t, w.Register("test.again", func(ctx context.Context, j *Job) ([]byte, error) {
			keep(ctx, j)
			if j.Attempt == 1 {
				return nil, errors.New("once more")
			}
			return []byte("ok"), nil
		}))
		must(t, w.Register("test.fails", func(ctx context.Context, j *Job) ([]byte, error) {
			keep(ctx, j)
			return nil, Permanent(errors.New("no"))
		}))
	}, WithHooks(hooks))
	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.ok", Key: "ok", Payload: []byte(`{}`)}),
		jobRecord(t, NewJob{Type: "test.again", Key: "again", Payload: []byte(`{}`)}),
		jobRecord(t, NewJob{Type: "test.fails", Key: "fails", Payload: []byte(`{}`)}),
	})
	want := map[string]bool{"ok/1": true, "again/1": true, "again/2": true, "fails/1": true}
	deadline := time.After(60 * time.Second)
	for len(want) > 0 {
		select {
		case d := <-dones:
			id := fmt.Sprintf("%s/%d", d.key, d.attempt)
			if !want[id] {
				t.Fatalf("OnDone for %s, not expected", id)
			}
			delete(want, id)
			if d.ctxErr != nil || errors.Is(d.cause, ErrLeaseLost) {
				t.Errorf("%s: OnDone's context ended (%v), the job's with cause %v; want OnDone's live, no lease lost", id, d.ctxErr, d.cause)
			}
			// A terminal failure is recorded after its dead-letter copy is
			// written, once the job has ended: OnDone then gets a context of
			// its own and the job's has ended (context.Canceled).
			if d.key != "fails" && d.cause != nil {
				t.Errorf("%s: the job's context ended with %v before OnDone; want it live", id, d.cause)
			}
		case <-deadline:
			t.Fatalf("OnDone still missing for %v", want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ctxs) != 4 {
		t.Fatalf("handlers ran %d times, want 4: %v", len(ctxs), ctxs)
	}
	for id, ctx := range ctxs {
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the handler's context still live 30 s after its end was reported", id)
		}
		if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) || !errors.Is(cause, context.Canceled) {
			t.Errorf("%s: the handler's context ended with %v, want context.Canceled", id, cause)
		}
	}
}
