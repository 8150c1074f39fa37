package leaseholdtest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/leaseholdtest"
)

type refundArgs struct {
	ChargeID string `json:"charge_id"`
}

type otherArgs struct {
	N int `json:"n"`
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    leasehold.Handler
		want leaseholdtest.Outcome
	}{
		{"completed", func(context.Context, *leasehold.Job) ([]byte, error) { return []byte("ok"), nil }, leaseholdtest.Completed},
		{"retry", func(context.Context, *leasehold.Job) ([]byte, error) { return nil, errors.New("flaky") }, leaseholdtest.Retry},
		{"failed", func(context.Context, *leasehold.Job) ([]byte, error) {
			return nil, leasehold.Permanent(errors.New("bad input"))
		}, leaseholdtest.Failed},
		{"lease lost returned", func(context.Context, *leasehold.Job) ([]byte, error) {
			return nil, leasehold.ErrLeaseLost
		}, leaseholdtest.LeaseLost},
		{"panic", func(context.Context, *leasehold.Job) ([]byte, error) { panic("boom") }, leaseholdtest.Retry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := leaseholdtest.New().Run(context.Background(), c.h)
			if got := a.Outcome(); got != c.want {
				t.Fatalf("outcome %v (err %v), want %v", got, a.Err, c.want)
			}
		})
	}
}

// TestLoseLease: the job's context ends with ErrLeaseLost, the next
// heartbeat and step are refused (do does not run), the outcome is
// LeaseLost even when the handler returns another error, and the next run
// is a takeover.
func TestLoseLease(t *testing.T) {
	t.Parallel()
	reg := compensation.NewRegistry()
	undo := compensation.MustRegister(reg, "refund", func(context.Context, refundArgs) error { return nil })
	env := leaseholdtest.New(leaseholdtest.WithCompensation(reg))
	ran := false
	a := env.Run(context.Background(), func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		env.LoseLease()
		if !errors.Is(context.Cause(ctx), leasehold.ErrLeaseLost) {
			t.Errorf("context cause %v, want ErrLeaseLost", context.Cause(ctx))
		}
		if err := job.Heartbeat(ctx, []byte("x")); !errors.Is(err, leasehold.ErrLeaseLost) {
			t.Errorf("Heartbeat after the loss: %v, want ErrLeaseLost", err)
		}
		err := leasehold.StepWith(ctx, job, "charge", func(context.Context) error { ran = true; return nil }, undo, refundArgs{})
		if !errors.Is(err, leasehold.ErrLeaseLost) {
			t.Errorf("StepWith after the loss: %v, want ErrLeaseLost", err)
		}
		return nil, errors.New("gave up")
	})
	if ran || len(a.Steps()) != 0 {
		t.Errorf("a step ran after the loss (ran %v, steps %v)", ran, a.Steps())
	}
	if a.Outcome() != leaseholdtest.LeaseLost {
		t.Errorf("outcome %v, want lease-lost", a.Outcome())
	}
	next := env.Run(context.Background(), func(context.Context, *leasehold.Job) ([]byte, error) { return nil, nil })
	if !next.Job().Takeover || next.Job().Fence() <= a.Job().Fence() {
		t.Errorf("next run: takeover %v, fence %d after %d; want a takeover with a higher fence",
			next.Job().Takeover, next.Job().Fence(), a.Job().Fence())
	}
}

// TestAttempts: the options describe the first attempt; each run is the
// next one and reads the last heartbeat recorded so far.
func TestAttempts(t *testing.T) {
	t.Parallel()
	env := leaseholdtest.New(leaseholdtest.WithKey("k1"), leaseholdtest.WithType("t.x"),
		leaseholdtest.WithPayload([]byte("p")), leaseholdtest.WithHeaders(map[string]string{"h": "v"}),
		leaseholdtest.WithAttempt(2), leaseholdtest.WithFence(40), leaseholdtest.WithLastHeartbeat([]byte(`"a0"`)))
	type seen struct {
		Key, Type, Payload, Header, Last string
		Attempt                          int
		Fence                            uint64
	}
	var got []seen
	beat := []string{`"a1"`, ``, `"a3"`}
	for i := range beat {
		env.Run(context.Background(), func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
			got = append(got, seen{job.Key, job.Type, string(job.Payload), job.Headers["h"],
				string(job.LastHeartbeat()), job.Attempt, job.Fence()})
			if beat[i] != "" {
				return nil, job.Heartbeat(ctx, []byte(beat[i]))
			}
			return nil, errors.New("retry")
		})
	}
	want := []seen{
		{"k1", "t.x", "p", "v", `"a0"`, 2, 40},
		{"k1", "t.x", "p", "v", `"a1"`, 3, 41},
		{"k1", "t.x", "p", "v", `"a1"`, 4, 42}, // the second attempt recorded nothing
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("attempts (-want +got):\n%s", d)
	}
}

// TestHeartbeat: every call is recorded, in order, as a copy; listeners see
// each; details over the bound are refused; typed values round-trip.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	type prog struct{ Step int }
	env := leaseholdtest.New(leaseholdtest.WithLastHeartbeat([]byte(`{"Step":7}`)))
	var heard int
	env.OnHeartbeat(func(*leaseholdtest.Attempt, []byte) { heard++ })
	a := env.Run(context.Background(), func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		p, ok, err := leasehold.LastHeartbeatAs[prog](job)
		if err != nil || !ok || p.Step != 7 {
			t.Errorf("LastHeartbeatAs: %v %v %v, want {7} true nil", p, ok, err)
		}
		buf := []byte(`{"Step":8}`)
		if err := job.Heartbeat(ctx, buf); err != nil {
			return nil, err
		}
		copy(buf, `{"Step":0}`) // the recorded details must not change
		if err := leasehold.RecordHeartbeat(ctx, job, prog{Step: 9}); err != nil {
			return nil, err
		}
		if err := job.Heartbeat(ctx, make([]byte, leasehold.MaxHeartbeatDetails+1)); err == nil {
			t.Error("details over MaxHeartbeatDetails accepted")
		}
		return nil, nil
	})
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	got, err := leaseholdtest.HeartbeatsAs[prog](a)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]prog{{8}, {9}}, got); d != "" || heard != 2 {
		t.Fatalf("heartbeats (-want +got):\n%s; listener calls %d, want 2", d, heard)
	}
	if string(a.LastHeartbeat()) != `{"Step":9}` {
		t.Fatalf("LastHeartbeat %s", a.LastHeartbeat())
	}
}

// TestLastHeartbeatUndecodable: details that do not decode are an error
// with ok true, not zero values.
func TestLastHeartbeatUndecodable(t *testing.T) {
	t.Parallel()
	env := leaseholdtest.New(leaseholdtest.WithLastHeartbeat([]byte("step 3")))
	env.Run(context.Background(), func(_ context.Context, job *leasehold.Job) ([]byte, error) {
		if _, ok, err := leasehold.LastHeartbeatAs[struct{ Step int }](job); err == nil || !ok {
			t.Errorf("LastHeartbeatAs of non-JSON details: ok %v err %v; want true and an error", ok, err)
		}
		return nil, nil
	})
}

// TestCompensate: steps are undone in reverse order with their typed
// arguments and step info; a step whose do failed is in doubt and undone
// too; a failing undo stops the saga there, and a second Compensate
// resumes without undoing a step twice.
func TestCompensate(t *testing.T) {
	t.Parallel()
	reg := compensation.NewRegistry()
	var undone []string
	failOnce := true
	refund := compensation.MustRegister(reg, "refund", func(ctx context.Context, a refundArgs) error {
		s, _ := compensation.StepFromContext(ctx)
		if a.ChargeID == "c2" && failOnce {
			failOnce = false
			return errors.New("provider down")
		}
		undone = append(undone, a.ChargeID+" "+s.IdempotencyKey()+map[bool]string{true: " in-doubt"}[s.InDoubt])
		return nil
	})
	env := leaseholdtest.New(leaseholdtest.WithKey("order-1"), leaseholdtest.WithFence(5), leaseholdtest.WithCompensation(reg))
	a := env.Run(context.Background(), func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		for _, id := range []string{"c1", "c2"} {
			if err := leasehold.StepWith(ctx, job, "charge "+id, func(context.Context) error { return nil }, refund, refundArgs{id}); err != nil {
				return nil, err
			}
		}
		return nil, leasehold.StepWith(ctx, job, "charge c3", func(context.Context) error {
			return errors.New("timeout") // did it charge? in doubt
		}, refund, refundArgs{"c3"})
	})
	if a.Outcome() != leaseholdtest.Retry || len(a.Steps()) != 3 {
		t.Fatalf("outcome %v, steps %v", a.Outcome(), a.Steps())
	}
	if err := a.Compensate(context.Background()); err == nil || !strings.Contains(err.Error(), "provider down") {
		t.Fatalf("Compensate: %v, want the failing handler's error", err)
	}
	if err := a.Compensate(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"c3 5:order-1/3/1 in-doubt", "c2 5:order-1/2/1", "c1 5:order-1/1/1"}
	if d := cmp.Diff(want, undone); d != "" {
		t.Fatalf("undone (-want +got):\n%s", d)
	}
	for _, s := range a.Steps() {
		if !s.Compensated {
			t.Errorf("step %q not marked compensated", s.Name)
		}
	}
}

// TestStepRefused: steps without a registry, with an unknown name, with a
// handle of another registry or the zero handle are refused and do not
// run.
func TestStepRefused(t *testing.T) {
	t.Parallel()
	reg, other := compensation.NewRegistry(), compensation.NewRegistry()
	compensation.MustRegister(reg, "refund", func(context.Context, refundArgs) error { return nil })
	foreign := compensation.MustRegister(other, "refund", func(context.Context, otherArgs) error { return nil })
	cases := []struct {
		name string
		reg  *compensation.Registry
		step func(context.Context, *leasehold.Job, func(context.Context) error) error
		want error
	}{
		{"no registry", nil, func(ctx context.Context, j *leasehold.Job, do func(context.Context) error) error {
			return leasehold.StepWith(ctx, j, "s", do, foreign, otherArgs{})
		}, leasehold.ErrNoCompensation},
		{"no registry by name", nil, func(ctx context.Context, j *leasehold.Job, do func(context.Context) error) error {
			return j.Step(ctx, "s", do, "refund", refundArgs{}) //nolint:staticcheck // the deprecated form still works
		}, leasehold.ErrNoCompensation},
		{"unknown name", reg, func(ctx context.Context, j *leasehold.Job, do func(context.Context) error) error {
			return j.Step(ctx, "s", do, "no.such", refundArgs{}) //nolint:staticcheck // the deprecated form still works
		}, compensation.ErrUnknownHandler},
		{"another registry", reg, func(ctx context.Context, j *leasehold.Job, do func(context.Context) error) error {
			return leasehold.StepWith(ctx, j, "s", do, foreign, otherArgs{})
		}, compensation.ErrUnknownHandler},
		{"zero handle", reg, func(ctx context.Context, j *leasehold.Job, do func(context.Context) error) error {
			return leasehold.StepWith(ctx, j, "s", do, compensation.Undo[refundArgs]{}, refundArgs{})
		}, compensation.ErrUnknownHandler},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := leaseholdtest.New(leaseholdtest.WithCompensation(c.reg))
			ran := false
			a := env.Run(context.Background(), func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
				return nil, c.step(ctx, job, func(context.Context) error { ran = true; return nil })
			})
			if !errors.Is(a.Err, c.want) || ran || len(a.Steps()) != 0 {
				t.Fatalf("err %v (want %v), do ran %v, steps %v", a.Err, c.want, ran, a.Steps())
			}
		})
	}
}

// TestLogger: Job.Logger writes to WithLogger's logger with the job's
// attributes.
func TestLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	env := leaseholdtest.New(leaseholdtest.WithKey("k9"), leaseholdtest.WithFence(3),
		leaseholdtest.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	env.Run(context.Background(), func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		job.Logger().InfoContext(ctx, "hello")
		return nil, nil
	})
	for _, want := range []string{"msg=hello", "job_type=test.job", "key=k9", "fence=3", "attempt=1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log line %q lacks %q", buf.String(), want)
		}
	}
}

// TestZeroJob: a Job built by hand does not panic: Heartbeat returns
// ErrNoWorker, Logger discards, Step needs compensation, Context is set.
func TestZeroJob(t *testing.T) {
	t.Parallel()
	j := &leasehold.Job{Key: "k"}
	ctx := context.Background()
	if err := j.Heartbeat(ctx, []byte("x")); !errors.Is(err, leasehold.ErrNoWorker) {
		t.Errorf("Heartbeat: %v, want ErrNoWorker", err)
	}
	if err := leasehold.RecordHeartbeat(ctx, j, 1); !errors.Is(err, leasehold.ErrNoWorker) {
		t.Errorf("RecordHeartbeat: %v, want ErrNoWorker", err)
	}
	j.Logger().Info("discarded")
	reg := compensation.NewRegistry()
	undo := compensation.MustRegister(reg, "u", func(context.Context, refundArgs) error { return nil })
	if err := leasehold.StepWith(ctx, j, "s", func(context.Context) error { return nil }, undo, refundArgs{}); !errors.Is(err, leasehold.ErrNoCompensation) {
		t.Errorf("StepWith: %v, want ErrNoCompensation", err)
	}
	if j.Context() == nil {
		t.Error("Context is nil")
	}
	if _, ok, err := leasehold.LastHeartbeatAs[int](j); ok || err != nil {
		t.Errorf("LastHeartbeatAs: ok %v err %v, want false nil", ok, err)
	}
}
