package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Action is a kind of fault (or topology change) the harness injects.
type Action int

const (
	// Kill sends SIGKILL to a worker and starts it again after a short delay.
	Kill Action = iota + 1
	// Pause sends SIGSTOP to a worker, waits longer than the lease TTL, and
	// sends SIGCONT: the worker comes back as a zombie whose leases are gone.
	Pause
	// RestartRedis stops redis-server and starts it again on its data.
	RestartRedis
	// AddWorker starts one more worker, forcing a rebalance.
	AddWorker
	// RemoveWorker stops a worker gracefully (SIGTERM), forcing a rebalance.
	RemoveWorker
	// KillBroker sends SIGKILL to the Kafka broker and, after For, starts
	// it again on its data directory (a real broker only).
	KillBroker
	// PauseBroker sends SIGSTOP to the Kafka broker for For, longer than
	// the workers' session timeout, and then SIGCONT (a real broker only).
	PauseBroker
	// Partition blackholes a worker's traffic to the services in Net (in
	// the directions Cut) for For, then heals: the worker keeps running.
	Partition
)

// Service names what a partition cuts a worker off from.
type Service int

const (
	// NetRedis is the worker's link to Redis.
	NetRedis Service = 1 << iota
	// NetKafka is the worker's link to the Kafka broker.
	NetKafka
	// NetAll is both.
	NetAll = NetRedis | NetKafka
)

func (s Service) String() string {
	switch s {
	case NetRedis:
		return "redis"
	case NetKafka:
		return "kafka"
	case NetAll:
		return "redis+kafka"
	}
	return fmt.Sprintf("service(%d)", int(s))
}

func (a Action) String() string {
	switch a {
	case Kill:
		return "kill"
	case Pause:
		return "pause"
	case RestartRedis:
		return "restart-redis"
	case AddWorker:
		return "add-worker"
	case RemoveWorker:
		return "remove-worker"
	case KillBroker:
		return "kill-broker"
	case PauseBroker:
		return "pause-broker"
	case Partition:
		return "partition"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Event is one step of a fault schedule.
type Event struct {
	// At is the offset from the start of the fault phase.
	At time.Duration
	// Action is what happens.
	Action Action
	// Slot picks the worker: the harness applies the event to the running
	// worker at position Slot modulo the number of running workers, in
	// the order the workers were first started. Unused for RestartRedis
	// and AddWorker.
	Slot int
	// For is how long a Pause or a Partition lasts or how long a killed
	// worker or a restarted Redis stays down.
	For time.Duration
	// Net is what a Partition cuts the worker off from.
	Net Service
	// Cut is the direction a Partition blackholes.
	Cut Direction
}

func (e Event) String() string {
	switch e.Action {
	case RestartRedis:
		return fmt.Sprintf("t=%s %s down=%s", e.At, e.Action, e.For)
	case AddWorker:
		return fmt.Sprintf("t=%s %s", e.At, e.Action)
	case Pause:
		return fmt.Sprintf("t=%s %s slot=%d for=%s", e.At, e.Action, e.Slot, e.For)
	case PauseBroker:
		return fmt.Sprintf("t=%s %s for=%s", e.At, e.Action, e.For)
	case KillBroker:
		return fmt.Sprintf("t=%s %s down=%s", e.At, e.Action, e.For)
	case Kill:
		return fmt.Sprintf("t=%s %s slot=%d down=%s", e.At, e.Action, e.Slot, e.For)
	case Partition:
		return fmt.Sprintf("t=%s %s slot=%d from=%s cut=%s for=%s", e.At, e.Action, e.Slot, e.Net, e.Cut, e.For)
	}
	return fmt.Sprintf("t=%s %s slot=%d", e.At, e.Action, e.Slot)
}

// ScheduleConfig shapes a fault schedule.
type ScheduleConfig struct {
	// Seed makes the schedule reproducible: the same seed and settings give
	// the same schedule.
	Seed uint64
	// Horizon is the length of the fault phase; no event is placed at or
	// after it.
	Horizon time.Duration
	// KillEvery is the mean interval between SIGKILLs (each interval is
	// drawn uniformly from [KillEvery/2, 3*KillEvery/2]).
	KillEvery time.Duration
	// PauseFor is how long a paused worker stays stopped; the harness
	// makes it longer than the lease TTL.
	PauseFor time.Duration
	// PauseEvery is the mean interval between pauses (default 3*KillEvery).
	PauseEvery time.Duration
	// Slots is the number of distinct worker positions events may name.
	Slots int
	// RedisDown is how long Redis stays stopped when restarted (default 1s).
	RedisDown time.Duration
	// BrokerEvery is the mean interval between broker faults, alternately
	// KillBroker and PauseBroker (each interval drawn uniformly from
	// [BrokerEvery/2, 3*BrokerEvery/2]). Zero: no broker faults.
	BrokerEvery time.Duration
	// BrokerPauseFor is how long a PauseBroker lasts (required with
	// BrokerEvery).
	BrokerPauseFor time.Duration
	// PartitionEvery is the mean interval between partitions of a worker
	// (each interval drawn uniformly from [PartitionEvery/2,
	// 3*PartitionEvery/2]). Zero: no partitions.
	PartitionEvery time.Duration
	// PartitionFor is how long a partition lasts (required with
	// PartitionEvery).
	PartitionFor time.Duration
	// PartitionNets are the links a partition may cut (each a Service:
	// NetAll, NetRedis, NetKafka); empty means all three.
	PartitionNets []Service
}

// Schedule is a seeded, time-ordered list of fault events.
type Schedule struct {
	Seed   uint64
	Events []Event
}

// NewSchedule generates the schedule for c. Every schedule with a positive
// horizon contains exactly one Redis restart (placed in the middle half of
// the horizon), one worker added in the first half and one removed in the
// second half, at least one pause, and kills every KillEvery on average.
// With BrokerEvery, it also holds at least one KillBroker and one
// PauseBroker, drawn from a stream of their own: the worker faults of a seed
// are the same with and without them.
func NewSchedule(c ScheduleConfig) (Schedule, error) {
	if c.Horizon <= 0 || c.KillEvery <= 0 || c.PauseFor <= 0 || c.Slots <= 0 {
		return Schedule{}, fmt.Errorf("%w: schedule needs a positive horizon, kill interval, pause and slot count", ErrConfig)
	}
	if c.BrokerEvery < 0 || c.BrokerEvery > 0 && c.BrokerPauseFor <= 0 {
		return Schedule{}, fmt.Errorf("%w: broker faults need a positive interval and pause", ErrConfig)
	}
	if c.PartitionEvery < 0 || c.PartitionEvery > 0 && c.PartitionFor <= 0 {
		return Schedule{}, fmt.Errorf("%w: partitions need a positive interval and length", ErrConfig)
	}
	pauseEvery := c.PauseEvery
	if pauseEvery <= 0 {
		pauseEvery = 3 * c.KillEvery
	}
	redisDown := c.RedisDown
	if redisDown <= 0 {
		redisDown = time.Second
	}
	rng := rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	var ev []Event
	// Topology changes and the Redis restart first, so that the draws for
	// them do not depend on how many kills fit in the horizon.
	h := c.Horizon
	ev = append(ev,
		Event{At: between(h/4, 3*h/4), Action: RestartRedis, For: redisDown},
		Event{At: between(h/10, h/2), Action: AddWorker},
		Event{At: between(h/2, 9*h/10), Action: RemoveWorker, Slot: rng.IntN(c.Slots)},
	)
	first := true
	for t := between(pauseEvery/3, pauseEvery); t < h || first; t += between(pauseEvery/2, 3*pauseEvery/2) {
		if t >= h {
			t = between(0, h-1)
		}
		ev = append(ev, Event{At: t, Action: Pause, Slot: rng.IntN(c.Slots), For: c.PauseFor})
		first = false
	}
	for t := between(c.KillEvery/2, 3*c.KillEvery/2); t < h; t += between(c.KillEvery/2, 3*c.KillEvery/2) {
		ev = append(ev, Event{At: t, Action: Kill, Slot: rng.IntN(c.Slots), For: between(100*time.Millisecond, time.Second)})
	}
	if c.BrokerEvery > 0 {
		ev = append(ev, brokerEvents(c)...)
	}
	if c.PartitionEvery > 0 {
		ev = append(ev, partitionEvents(c)...)
	}
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].At < ev[j].At })
	return Schedule{Seed: c.Seed, Events: ev}, nil
}

// brokerEvents draws the broker faults of c: alternately a kill (down for
// 0.5 to 2s before the restart) and a pause, every BrokerEvery on average,
// starting with either; a kill in the first third and a pause in the second
// half of the horizon are added if the draws gave none.
func brokerEvents(c ScheduleConfig) []Event {
	rng := rand.New(rand.NewPCG(c.Seed^0x5851f42d4c957f2d, c.Seed))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	event := func(at time.Duration, kill bool) Event {
		if kill {
			return Event{At: at, Action: KillBroker, For: between(500*time.Millisecond, 2*time.Second)}
		}
		return Event{At: at, Action: PauseBroker, For: c.BrokerPauseFor}
	}
	h, every := c.Horizon, c.BrokerEvery
	var ev []Event
	kill := rng.IntN(2) == 0
	kills, pauses := 0, 0
	for t := between(every/2, every); t < h; t += between(every/2, 3*every/2) {
		ev = append(ev, event(t, kill))
		if kill {
			kills++
		} else {
			pauses++
		}
		kill = !kill
	}
	if kills == 0 {
		ev = append(ev, event(between(h/10, h/3), true))
	}
	if pauses == 0 {
		ev = append(ev, event(between(h/2, 4*h/5), false))
	}
	return ev
}

// partitionEvents draws the partitions of c, from a stream of their own (the
// other faults of a seed are the same with and without them): every
// PartitionEvery on average, the first after at least half of it, a random
// worker cut off from Redis, from Kafka, or from both, in one direction or
// both. The first six (when the horizon has room) cut both ways and cycle
// through the services (both, Redis, Kafka), so that a short run holds every
// kind, and twice the one whose leases are sure to be taken over.
func partitionEvents(c ScheduleConfig) []Event {
	rng := rand.New(rand.NewPCG(c.Seed^0x2545f4914f6cdd1d, c.Seed+1))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	services := c.PartitionNets
	if len(services) == 0 {
		services = []Service{NetAll, NetRedis, NetKafka}
	}
	dirs := []Direction{Both, ToServer, FromServer}
	var ev []Event
	every := c.PartitionEvery
	for t := between(every/2, every); t < c.Horizon; t += between(every/2, 3*every/2) {
		e := Event{At: t, Action: Partition, Slot: rng.IntN(c.Slots), For: c.PartitionFor,
			Net: services[rng.IntN(len(services))], Cut: dirs[rng.IntN(len(dirs))]}
		if n := len(ev); n < 2*len(services) {
			e.Net, e.Cut = services[n%len(services)], Both
		}
		ev = append(ev, e)
	}
	if len(ev) == 0 {
		ev = append(ev, Event{At: between(0, c.Horizon/2), Action: Partition, Slot: rng.IntN(c.Slots),
			For: c.PartitionFor, Net: NetAll, Cut: Both})
	}
	return ev
}

// Count returns how many events of kind a the schedule holds.
func (s Schedule) Count(a Action) int {
	n := 0
	for _, e := range s.Events {
		if e.Action == a {
			n++
		}
	}
	return n
}

// String prints the seed first, then one event a line.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d\n", s.Seed)
	for _, e := range s.Events {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}
