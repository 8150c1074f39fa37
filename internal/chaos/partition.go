package chaos

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// workerNet is one worker's network as the harness sees it: its own link to
// Redis and its own link to the Kafka broker (the worker dials the broker's
// advertised address through it, see `worker run --kafka-dial-map`). The
// links outlive the worker's restarts. At a heal the Redis link delivers
// what it held, as TCP would; the Kafka link resets its connections.
type workerNet struct {
	name  string
	redis *Link
	kafka []*Link // one a broker, in the order of run.brokerAddrs
	addrs []string
}

// dialMap is the worker's --kafka-dial-map: each broker through its link.
func (n *workerNet) dialMap() string {
	pairs := make([]string, len(n.kafka))
	for i, l := range n.kafka {
		pairs[i] = n.addrs[i] + "=" + l.Addr()
	}
	return strings.Join(pairs, ",")
}

// openNet opens the links of worker name; taps, when not nil, observes its
// Redis traffic.
func (r *run) openNet(ctx context.Context, name string) (*workerNet, error) {
	var newTap func() Tap
	if r.hist != nil {
		newTap = func() Tap { return r.hist.tap(name) }
	}
	rl, err := NewLink(ctx, r.redis.Addr(), newTap)
	if err != nil {
		return nil, err
	}
	n := &workerNet{name: name, redis: rl, addrs: r.brokerAddrs()}
	for _, addr := range n.addrs {
		kl, err := NewLink(ctx, addr, nil)
		if err != nil {
			n.close()
			return nil, err
		}
		// Kafka connections are reset at the heal rather than handed what
		// they held: the dev-broker (kfake) keeps a group member for every
		// JoinGroup it receives, also one its client gave up on during the
		// partition, and waits for it in every rebalance from then on (seen as
		// a group stuck in PreparingRebalance with hundreds of members).
		kl.ResetOnHeal()
		n.kafka = append(n.kafka, kl)
	}
	return n, nil
}

func (n *workerNet) close() {
	n.redis.Close()
	for _, l := range n.kafka {
		l.Close()
	}
}

// cut blackholes the links of the services in s in direction d.
func (n *workerNet) cut(s Service, d Direction) {
	if s&NetRedis != 0 {
		n.redis.Cut(d)
	}
	if s&NetKafka != 0 {
		for _, l := range n.kafka {
			l.Cut(d)
		}
	}
}

// heal lets everything through again.
func (n *workerNet) heal() {
	n.redis.Heal()
	for _, l := range n.kafka {
		l.Heal()
	}
}

// PartitionMark is one partition the run carried out.
type PartitionMark struct {
	Worker   string
	Net      Service
	Cut      Direction
	From, To time.Time // local time of the cut and of the heal
}

// partitions records the partitions carried out.
type partitions struct {
	mu    sync.Mutex
	marks []PartitionMark
}

func (p *partitions) add(m PartitionMark) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks = append(p.marks, m)
}

func (p *partitions) all() []PartitionMark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PartitionMark(nil), p.marks...)
}

// pickRunning is pick for a partition: of the live, idle workers it takes
// the one with the most jobs in flight (by the history; the slot breaks
// ties), so that a partition catches leases to take over rather than an
// idle worker.
func (r *run) pickRunning(slot int) *Proc {
	var running map[string]int
	if r.hist != nil {
		running = r.hist.Running()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var live []*Proc
	for _, w := range r.workers {
		if !r.removed[w] && w.Running() && !r.busy[w] {
			live = append(live, w)
		}
	}
	var best *Proc
	for i := range live {
		w := live[(slot+i)%len(live)]
		if best == nil || running[w.Name] > running[best.Name] {
			best = w
		}
	}
	if best != nil {
		r.busy[best] = true
	}
	return best
}

// partition carries out e (a Partition) on a live worker in the background:
// cut, wait e.For, heal. It returns why it could not (see [run.workerFault]).
func (r *run) partition(ctx context.Context, e Event, log *slog.Logger) string {
	if r.liveCount() < 2 {
		return "it would leave no live worker"
	}
	w := r.pickRunning(e.Slot)
	if w == nil {
		return "no idle worker"
	}
	r.mu.Lock()
	n := r.nets[w]
	r.cutOff[w] = true
	r.mu.Unlock()
	from := time.Now()
	n.cut(e.Net, e.Cut)
	if e.Net&NetRedis != 0 {
		// Its leases stop being renewed like a paused worker's: the
		// observer must not count them as a killed worker's.
		r.obs.MarkPause(e.For)
	}
	log.Info("partitioned", slog.String("worker", w.Name), slog.String("from", e.Net.String()),
		slog.String("cut", e.Cut.String()))
	r.faults.Go(func() {
		defer r.idle(w)
		sleepCtx(ctx, e.For)
		n.heal()
		to := time.Now()
		r.mu.Lock()
		delete(r.cutOff, w)
		r.mu.Unlock()
		r.parts.add(PartitionMark{Worker: w.Name, Net: e.Net, Cut: e.Cut, From: from, To: to})
		log.Info("healed", slog.String("worker", w.Name), slog.Duration("after", to.Sub(from)))
	})
	return ""
}
