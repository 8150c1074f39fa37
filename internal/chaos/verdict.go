package chaos

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// HistoryVerdict is the outcome of checking a run's history against
// [RecordModel].
type HistoryVerdict struct {
	// Ops counts the operations checked; Ambiguous those without an answer.
	Ops, Ambiguous int
	// Keys counts the idempotency keys the operations touch.
	Keys int
	// Claims counts the claims among the operations: every delivery of a
	// record claims its key once (a record parked behind a held key claims
	// again when it wakes), so Claims over the jobs bounds the deliveries
	// per job from above.
	Claims int
	// ClaimsFull counts the claims a short call answered "full" (the key has
	// a record that needs the full keys: a retry, a takeover, a record that
	// outlived its result key); each is followed by the same delivery's
	// claim in a full call, and none is in Claims.
	ClaimsFull int
	// Result is porcupine's: Ok (linearizable), Illegal, or Unknown (the
	// check timed out).
	Result porcupine.CheckResult
	// Offending describes the operations of up to three keys whose history
	// is not linearizable.
	Offending []string
	// Visualization is the HTML file porcupine wrote for an illegal history.
	Visualization string
}

// CheckHistory checks ops against [RecordModel] within timeout. For an
// illegal history it writes porcupine's visualisation to dir/history.html
// and names the offending keys' operations.
func CheckHistory(ops []porcupine.Operation, dir string, timeout time.Duration) (HistoryVerdict, error) {
	v := HistoryVerdict{Ops: len(ops)}
	keys := map[string]bool{}
	for _, op := range ops {
		keys[op.Input.(Op).Key] = true
		if op.Input.(Op).Kind == OpClaim {
			if out := op.Output.(OpOutput); !out.Unknown && out.Code == ClaimFull {
				v.ClaimsFull++
			} else {
				v.Claims++
			}
		}
		if op.Output.(OpOutput).Unknown {
			v.Ambiguous++
		}
	}
	v.Keys = len(keys)
	model := RecordModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	v.Result = res
	if res != porcupine.Illegal {
		return v, nil
	}
	v.Visualization = filepath.Join(dir, "history.html")
	if err := porcupine.VisualizePath(model, info, v.Visualization); err != nil {
		return v, fmt.Errorf("chaos: history visualisation: %w", err)
	}
	for _, part := range partitionByKey(ops) {
		if len(v.Offending) == 3 {
			break
		}
		if porcupine.CheckOperations(model, part) {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmpInt64(a.Call, b.Call) })
		s := fmt.Sprintf("key %s:", part[0].Input.(Op).Key)
		for _, op := range part {
			s += fmt.Sprintf("\n  %s %s [%s, %s]", op.Metadata.(Meta).Worker, describeOp(op.Input.(Op), op.Output.(OpOutput)),
				stamp(op.Call), stamp(op.Return))
		}
		v.Offending = append(v.Offending, s)
	}
	return v, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func stamp(ns int64) string {
	if ns == math.MaxInt64 {
		return "no answer"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000000")
}

// workerEvents are what the workers' logs say about their jobs: every
// fenced write and every cancelled handler.
type workerEvents struct {
	writes  []writeEvent
	cancels map[attempt]time.Time // the attempt's lease was lost locally, or its handler cancelled or returned, then
}

type attempt struct {
	key   string
	fence uint64
}

type writeEvent struct {
	worker     string
	key        string
	fence      uint64
	began, end time.Time
	outcome    string // applied, refused, error, unknown (no end logged)
}

var (
	beginLine  = regexp.MustCompile(`msg="fenced write begins" key=(\S+) fence=(\d+) began_us=(\d+)`)
	writeLine  = regexp.MustCompile(`msg="fenced write" key=(\S+) fence=(\d+) began_us=(\d+) ended_us=(\d+) outcome=(\w+)`)
	cancelLine = regexp.MustCompile(`msg="transfer (?:cancelled|returned)" key=(\S+) fence=(\d+) at_us=(\d+)`)
	// The lease Manager's own line at a lease's local deadline.
	leaseLostLine = regexp.MustCompile(`^time=(\S+) level=WARN msg="lease lost" lease=\S*?\}:(\S+) fence=(\d+)`)
)

// readWorkerEvents reads the debug events of demo.transfer from the logs of
// the workers (worker name -> log path). A write that began but never
// ended (the worker was killed meanwhile) is kept with outcome "unknown".
func readWorkerEvents(logs map[string]string) (workerEvents, error) {
	ev := workerEvents{cancels: map[attempt]time.Time{}}
	for name, path := range logs {
		if err := ev.read(name, path); err != nil {
			return ev, err
		}
	}
	return ev, nil
}

func (ev *workerEvents) read(worker, path string) error {
	fh, err := os.Open(path) //nolint:gosec // the run's own log files
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	defer func() { _ = fh.Close() }()
	type begun struct {
		key   string
		fence uint64
		at    int64
	}
	open := map[begun]bool{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case beginLine.MatchString(line):
			m := beginLine.FindStringSubmatch(line)
			f, _ := strconv.ParseUint(m[2], 10, 64)
			b, _ := strconv.ParseInt(m[3], 10, 64)
			open[begun{m[1], f, b}] = true
		case writeLine.MatchString(line):
			m := writeLine.FindStringSubmatch(line)
			f, _ := strconv.ParseUint(m[2], 10, 64)
			b, _ := strconv.ParseInt(m[3], 10, 64)
			e, _ := strconv.ParseInt(m[4], 10, 64)
			delete(open, begun{m[1], f, b})
			ev.writes = append(ev.writes, writeEvent{worker: worker, key: m[1], fence: f,
				began: time.UnixMicro(b), end: time.UnixMicro(e), outcome: m[5]})
		case cancelLine.MatchString(line):
			m := cancelLine.FindStringSubmatch(line)
			f, _ := strconv.ParseUint(m[2], 10, 64)
			at, _ := strconv.ParseInt(m[3], 10, 64)
			ev.cancel(attempt{m[1], f}, time.UnixMicro(at))
		case leaseLostLine.MatchString(line):
			m := leaseLostLine.FindStringSubmatch(line)
			f, _ := strconv.ParseUint(m[3], 10, 64)
			if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				ev.cancel(attempt{m[2], f}, at)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("chaos: read %s: %w", path, err)
	}
	for b := range open {
		ev.writes = append(ev.writes, writeEvent{worker: worker, key: b.key, fence: b.fence,
			began: time.UnixMicro(b.at), outcome: "unknown"})
	}
	return nil
}

// cancel records that attempt a was cancelled at t, keeping the earliest:
// the lease's local deadline or the handler's cancellation or return,
// whichever came first. A job started after its lease was lost (it waited
// for a slot) has its handler invoked with its context already cancelled:
// the deadline is when it was lost.
func (ev *workerEvents) cancel(a attempt, t time.Time) {
	if old, ok := ev.cancels[a]; !ok || t.Before(old) {
		ev.cancels[a] = t
	}
}

// addTo adds the writes to h.
func (ev workerEvents) addTo(h *History) {
	for _, w := range ev.writes {
		out := OpOutput{Code: WriteApplied}
		switch w.outcome {
		case "refused":
			out.Code = WriteRefused
		case "error", "unknown":
			out.Unknown = true
		}
		h.AddWrite(w.worker, w.key, w.fence, w.began, w.end, out)
	}
}

// PartitionVerdict times the takeovers of the leases of workers partitioned
// from Redis.
type PartitionVerdict struct {
	// Takeovers counts the takeovers, by another worker, of a lease that a
	// worker partitioned from Redis held; Measured those whose old handler
	// reported its cancellation (the others never started their handler:
	// the claim's answer was lost in the partition).
	Takeovers, Measured int
	// OverlapMax is the largest of (old handler cancelled) - (takeover
	// answered to the new holder) over the measured takeovers: above 0,
	// the old holder's handler was still running when the new one started.
	// The takeover's answer comes before the new handler starts, so the
	// figure errs on the side of overlap.
	OverlapMax time.Duration
	// ZombieWrites counts the fenced writes an old holder attempted after
	// its lease was taken over; ZombieWritesApplied those the guard
	// applied because the new holder had not written yet (legal: the guard
	// only refuses a fence older than one it has seen), and
	// ZombieWritesAfterNewer those attempted after the new holder's write,
	// which must all have been refused: ZombieWritesAfterNewerApplied is
	// must-be-zero.
	ZombieWrites, ZombieWritesApplied, ZombieWritesAfterNewer, ZombieWritesAfterNewerApplied int
	// KafkaOnlyCommits counts the commits that workers partitioned from
	// Kafka only (not from Redis) got written while partitioned: they
	// finish their jobs. KafkaOnlyTakeovers counts takeovers of such a
	// worker's leases during its partition, the worker not killed
	// meanwhile (it keeps renewing them, so only a coinciding fault, such
	// as the Redis restart, explains one).
	KafkaOnlyCommits, KafkaOnlyTakeovers int
	// Closest are the three measured takeovers with the largest overlap
	// (the thinnest margin), to look up in the workers' logs.
	Closest []TimedTakeover
}

// TimedTakeover is one measured takeover of a partitioned worker's lease.
type TimedTakeover struct {
	Key       string
	Fence     uint64 // the old holder's
	Old, New  string // workers
	Cancelled time.Time
	Overlap   time.Duration // Cancelled - the takeover's answer
}

// judgePartitions derives the partition figures from the history's claims,
// the workers' cancellation and write events, and the partitions carried
// out.
func judgePartitions(ops []porcupine.Operation, ev workerEvents, parts []PartitionMark, kills []KillMark) PartitionVerdict {
	var v PartitionVerdict
	v.OverlapMax = math.MinInt64
	grants := map[attempt]grant{}
	for _, op := range ops {
		in, out := op.Input.(Op), op.Output.(OpOutput)
		if in.Kind == OpClaim && !out.Unknown && (out.Code == ClaimAcquired || out.Code == ClaimTakeover) {
			grants[attempt{in.Key, out.Fence}] = grant{op.Metadata.(Meta).Worker, op.Return}
		}
	}
	newestWrite := map[string][]writeEvent{} // key -> applied writes
	for _, w := range ev.writes {
		if w.outcome == "applied" {
			newestWrite[w.key] = append(newestWrite[w.key], w)
		}
	}
	for _, op := range ops {
		in, out := op.Input.(Op), op.Output.(OpOutput)
		if in.Kind != OpClaim || out.Unknown || out.Code != ClaimTakeover {
			continue
		}
		old, ok := grants[attempt{in.Key, out.Prev}]
		newWorker := op.Metadata.(Meta).Worker
		if !ok || old.worker == newWorker || !partitionedFromRedis(parts, old.worker, old.ret, op.Call) ||
			killedBetween(kills, old.worker, old.ret, op.Call) {
			continue
		}
		v.Takeovers++
		if at, ok := ev.cancels[attempt{in.Key, out.Prev}]; ok {
			v.Measured++
			ov := at.Sub(time.Unix(0, op.Return))
			v.OverlapMax = max(v.OverlapMax, ov)
			v.Closest = append(v.Closest, TimedTakeover{Key: in.Key, Fence: out.Prev, Old: old.worker, New: newWorker,
				Cancelled: at, Overlap: ov})
		}
		takenAt := time.Unix(0, op.Return)
		for _, w := range ev.writes {
			if w.key != in.Key || w.fence != out.Prev || w.worker != old.worker || w.began.Before(takenAt) {
				continue
			}
			v.ZombieWrites++
			if w.outcome == "applied" {
				v.ZombieWritesApplied++
			}
			for _, nw := range newestWrite[in.Key] {
				if nw.fence > w.fence && nw.end.Before(w.began) {
					v.ZombieWritesAfterNewer++
					if w.outcome == "applied" {
						v.ZombieWritesAfterNewerApplied++
					}
					break
				}
			}
		}
	}
	if v.Measured == 0 {
		v.OverlapMax = 0
	}
	slices.SortFunc(v.Closest, func(a, b TimedTakeover) int { return cmpInt64(int64(b.Overlap), int64(a.Overlap)) })
	v.Closest = v.Closest[:min(3, len(v.Closest))]
	v.KafkaOnlyCommits, v.KafkaOnlyTakeovers = kafkaOnly(ops, grants, parts, kills)
	return v
}

// kafkaOnly counts, over the partitions from Kafka alone, the commits the
// partitioned worker got written and the takeovers of its leases, both
// while it was partitioned.
func kafkaOnly(ops []porcupine.Operation, grants map[attempt]grant, parts []PartitionMark, kills []KillMark) (commits, takeovers int) {
	for _, p := range parts {
		if p.Net != NetKafka {
			continue
		}
		from, to := p.From.UnixNano(), p.To.UnixNano()
		for _, op := range ops {
			in, out := op.Input.(Op), op.Output.(OpOutput)
			if out.Unknown || op.Call < from || op.Call > to {
				continue
			}
			switch {
			case in.Kind == OpCommit && out.Code == CommitWritten && op.Metadata.(Meta).Worker == p.Worker:
				commits++
			case in.Kind == OpClaim && out.Code == ClaimTakeover:
				if g, ok := grants[attempt{in.Key, out.Prev}]; ok && g.worker == p.Worker && !killedBetween(kills, g.worker, g.ret, op.Call) {
					takeovers++
				}
			}
		}
	}
	return commits, takeovers
}

// grant is a claim that ran the job: the worker it answered and when.
type grant struct {
	worker string
	ret    int64
}

// KillMark is one SIGKILL of a worker the run carried out.
type KillMark struct {
	Worker string
	At     time.Time
}

// killedBetween reports whether worker was killed between from and to (Unix
// nanoseconds): a lease it held then was taken over because of the kill.
func killedBetween(kills []KillMark, worker string, from, to int64) bool {
	for _, k := range kills {
		if k.Worker == worker && k.At.UnixNano() >= from && k.At.UnixNano() <= to {
			return true
		}
	}
	return false
}

// partitionedFromRedis reports whether worker was cut off from Redis at
// some time between from and to (Unix nanoseconds).
func partitionedFromRedis(parts []PartitionMark, worker string, from, to int64) bool {
	for _, p := range parts {
		if p.Worker == worker && p.Net&NetRedis != 0 && p.From.UnixNano() <= to && p.To.UnixNano() >= from {
			return true
		}
	}
	return false
}
