package leasehold

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// The worker's pool. WithConcurrency(n) bounds the handlers running at once:
// a claimed job holds one of n run slots (w.sem) from its claim until its
// handler returns, then trades it for one of n commit slots (w.commits) while
// its outcome is written (the fenced completion, a retry's release, a
// failure's record). The dispatcher can then claim the next records while
// the finished jobs' completions wait for the next batch call, so that both
// calls carry more jobs each: at concurrency 64, about 28 jobs a script call
// instead of 18 (docs/benchmarks.md). At most 2n jobs are in hand at once,
// n of them past their handler; a job keeps its lease, its offset and its
// place in Running until its outcome is written.

// initPool makes the run and commit slots.
func (w *Worker) initPool() {
	w.sem = semaphore.NewWeighted(int64(w.cfg.concurrency))
	w.commits = semaphore.NewWeighted(int64(w.cfg.concurrency))
}

// handlerReturned trades job's run slot for a commit slot. Waiting for a
// commit slot cannot deadlock: commit slot holders never wait for a run slot.
func (w *Worker) handlerReturned(job *Job) {
	if job.committing {
		return
	}
	_ = w.commits.Acquire(context.Background(), 1) // no deadline: cannot fail
	job.committing = true
	w.sem.Release(1)
}

// leavePool gives back the slot job holds when it ends.
func (w *Worker) leavePool(job *Job) {
	if job.committing {
		w.commits.Release(1)
		return
	}
	w.sem.Release(1)
}
