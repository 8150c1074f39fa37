package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
)

// SleepJob is the payload of demo.sleep: a long job of Steps steps lasting
// DurationMS in total, heartbeating after each step.
type SleepJob struct {
	DurationMS int    `json:"duration_ms"`
	Steps      int    `json:"steps"`
	FailAt     int    `json:"fail_at,omitempty"` // fail once (retryably) when reaching this step on attempt 1
	Reserve    bool   `json:"reserve,omitempty"` // run a saga step "reserve" first, undone by demo.sleep.release
	Pad        string `json:"pad,omitempty"`     // filler for payload-size tests
}

// SleepProgress is demo.sleep's heartbeat details.
type SleepProgress struct {
	Step  int `json:"step"`
	Steps int `json:"steps"`
}

// SleepResult is demo.sleep's result.
type SleepResult struct {
	Steps       int    `json:"steps"`
	ResumedFrom int    `json:"resumed_from"`
	Fence       uint64 `json:"fence"`
}

// ReleaseHandler is the compensation of demo.sleep's "reserve" step.
const ReleaseHandler = "demo.sleep.release"

// ReleaseArgs are the arguments of [ReleaseHandler].
type ReleaseArgs struct {
	Key   string `json:"key"`
	Fence uint64 `json:"fence"`
}

// registerDemoCompensations registers demo.sleep's release handler; onRelease
// (optional) sees every release.
func registerDemoCompensations(reg *compensation.Registry, onRelease func(context.Context, ReleaseArgs)) error {
	return compensation.Register(reg, ReleaseHandler, func(ctx context.Context, a ReleaseArgs) error {
		if onRelease != nil {
			onRelease(ctx, a)
		}
		return nil
	})
}

// maxSleep bounds a demo.sleep job, maxSteps its heartbeats.
const (
	maxSleep = 10 * time.Minute
	maxSteps = 10000
)

// registerDemoJobs registers the demo job types on w.
func registerDemoJobs(w *leasehold.Worker) error {
	return w.Register("demo.sleep", leasehold.Typed(sleepJob), leasehold.WithMaxAttempts(5),
		leasehold.WithBackoff(200*time.Millisecond, 5*time.Second))
}

// sleepJob runs a demo.sleep job: it resumes from the previous attempt's last
// heartbeat, so a job taken over after a lost lease does not start again.
func sleepJob(ctx context.Context, job *leasehold.Job, in SleepJob) (SleepResult, error) {
	steps := min(max(in.Steps, 1), maxSteps)
	total := min(time.Duration(max(in.DurationMS, 0))*time.Millisecond, maxSleep)
	from := 0
	if lh := job.LastHeartbeat(); lh != nil {
		var p SleepProgress
		if err := json.Unmarshal(lh, &p); err == nil && p.Step >= 0 && p.Step <= steps {
			from = p.Step
		}
	}
	if in.Reserve {
		// A saga step with nothing to take back but a name: the demo shows
		// it compensated when the attempt loses its lease or fails.
		//nolint:staticcheck // by name: the demo registers compensations and jobs apart (workercmd.RegisterCompensations, Register)
		err := job.Step(ctx, "reserve", func(context.Context) error { return nil }, ReleaseHandler,
			ReleaseArgs{Key: job.Key, Fence: job.Fence()})
		if err != nil {
			return SleepResult{}, err
		}
	}
	step := total / time.Duration(steps)
	t := time.NewTimer(step)
	defer t.Stop()
	for i := from; i < steps; i++ {
		if i > from {
			t.Reset(step)
		}
		select {
		case <-ctx.Done():
			return SleepResult{}, context.Cause(ctx)
		case <-t.C:
		}
		if in.FailAt > 0 && i+1 == in.FailAt && job.Attempt == 1 {
			return SleepResult{}, fmt.Errorf("demo.sleep: planned failure at step %d", i+1)
		}
		d, _ := json.Marshal(SleepProgress{Step: i + 1, Steps: steps})
		if err := job.Heartbeat(ctx, d); err != nil {
			return SleepResult{}, err
		}
	}
	return SleepResult{Steps: steps, ResumedFrom: from, Fence: job.Fence()}, nil
}
