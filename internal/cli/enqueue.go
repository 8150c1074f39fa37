package cli

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/outcome"
	"github.com/leasehold/leasehold/tracing"
)

// enqueueConfig is what `worker enqueue` reads.
type enqueueConfig struct {
	brokers, topic, typ, keyPrefix string
	count, payloadSize, steps      int
	accounts                       int
	dup, rate                      float64
	sleep                          time.Duration
	progress                       bool
}

func cmdEnqueue(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "enqueue", "")
	var c enqueueConfig
	f.stringVar(&c.brokers, "brokers", "LEASEHOLD_BROKERS", "127.0.0.1:9092", "Kafka seed brokers, host:port comma-separated")
	// --topics and LEASEHOLD_TOPICS as for `worker run`, naming one topic;
	// --topic and LEASEHOLD_TOPIC are the older spellings, still read.
	deprecatedEnv := f.env("LEASEHOLD_TOPIC", "")
	f.stringVar(&c.topic, "topics", "LEASEHOLD_TOPICS", cmp.Or(deprecatedEnv, leasehold.DefaultTopic), "the topic to produce to; it must exist")
	oldTopic := f.str("topic", "", "", "deprecated spelling of --topics (LEASEHOLD_TOPIC, its environment variable, is deprecated too)")
	f.StringVar(&c.typ, "type", "demo.sleep", "job type; types other than demo.sleep and demo.transfer get the payload {\"n\": N}, N the job's number")
	f.StringVar(&c.keyPrefix, "key-prefix", "", "idempotency key prefix; keys are PREFIX-N (default: a random run id, so each run enqueues new jobs)")
	f.IntVar(&c.count, "count", 100, "distinct jobs to enqueue")
	f.Float64Var(&c.dup, "dup", 0, "fraction of extra duplicate records, 0 to 1 (0.2: 20 duplicates per 100 jobs)")
	f.Float64Var(&c.rate, "rate", 0, "records per second; 0 is as fast as the broker takes them")
	f.IntVar(&c.payloadSize, "payload-size", 0, "pad each payload to at least this many bytes")
	f.DurationVar(&c.sleep, "sleep", 2*time.Second, "demo.sleep: how long each job runs")
	f.IntVar(&c.steps, "steps", 10, "demo.sleep: heartbeats per job, 1 to 10000")
	f.IntVar(&c.accounts, "accounts", 10, "demo.transfer: transfers of 1 go from acct-N to acct-N+1, N = job mod accounts")
	f.BoolVar(&c.progress, "progress", true, "draw a progress bar on stderr")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	deprecated := ""
	if f.isSet("topic") {
		if f.isSet("topics") && *oldTopic != c.topic {
			return usagef("--topic %q and --topics %q differ: pass --topics only (--topic is its deprecated spelling)", *oldTopic, c.topic)
		}
		c.topic = *oldTopic
		deprecated = "--topic is deprecated: use --topics"
	} else if deprecatedEnv != "" && e.Getenv("LEASEHOLD_TOPICS") == "" && !f.isSet("topics") {
		deprecated = "LEASEHOLD_TOPIC is deprecated: use LEASEHOLD_TOPICS"
	}
	if err := checkEnqueue(c); err != nil {
		return err
	}
	if err := enqueue(ctx, e, c); err != nil {
		return err
	}
	if deprecated != "" {
		// After the work, so that a failure stays one line.
		_, _ = fmt.Fprintf(e.Stderr, "%s enqueue: %s\n", e.application().name, deprecated)
	}
	return nil
}

// checkEnqueue refuses flag values out of range.
func checkEnqueue(c enqueueConfig) error {
	switch topics := splitList(c.topic); {
	case len(topics) != 1:
		return usagef("--topics %q: want exactly one topic to produce to", c.topic)
	case c.count < 0 || c.count > 100_000_000:
		return usagef("count %d: want 0 to 100000000", c.count)
	case c.dup < 0 || c.dup > 1:
		return usagef("dup %v: want 0 to 1", c.dup)
	case c.rate < 0:
		return usagef("rate %v: want >= 0", c.rate)
	case c.payloadSize < 0 || c.payloadSize > leasehold.DefaultMaxPayload:
		return usagef("payload-size %d: want 0 to %d", c.payloadSize, leasehold.DefaultMaxPayload)
	case c.accounts < 2:
		return usagef("accounts %d: want at least 2", c.accounts)
	case c.sleep < 0 || c.sleep > maxSleep:
		return usagef("sleep %v: want 0 to %v", c.sleep, maxSleep)
	case c.steps < 1 || c.steps > maxSteps:
		return usagef("steps %d: want 1 to %d", c.steps, maxSteps)
	}
	if err := leasehold.ValidateType(c.typ); err != nil {
		return &usageError{err}
	}
	if c.keyPrefix != "" {
		if err := leasehold.ValidateKey(c.keyPrefix); err != nil {
			return &usageError{err}
		}
	}
	return checkBrokers("--brokers", splitList(c.brokers))
}

func enqueue(ctx context.Context, e *Env, c enqueueConfig) error {
	c.topic = strings.TrimSpace(c.topic)
	if c.keyPrefix == "" {
		c.keyPrefix = "job-" + strings.ToLower(crand.Text()[:8])
	}
	// Traces go where the OTEL_* environment says, as for `worker run`
	// (OTEL_TRACES_EXPORTER=none turns them off); they are flushed on return.
	_, tr, stopTracing, err := startTracing(ctx, "leasehold-producer", nil)
	if err != nil {
		return err
	}
	defer stopTracing()
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitList(c.brokers)...), kgo.DefaultProduceTopic(c.topic),
		kgo.ProducerLinger(5*time.Millisecond), tr.KgoOpt())
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = cl.Ping(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("kafka at %s does not answer: %w", c.brokers, err)
	}
	if err := topicExists(ctx, cl, c.topic, e.application().name); err != nil {
		return err
	}
	var bar io.Writer
	if c.progress {
		bar = e.Stderr
	}
	n, dups, err := enqueueJobs(ctx, cl, tr, c, bar)
	if err != nil {
		return fmt.Errorf("produced %d of the records to %s, then: %w", n, c.topic, err)
	}
	_, _ = fmt.Fprintf(e.Stdout, "enqueued %d records (%d jobs, %d duplicates) to %s, keys %s-0..%d\n",
		n, n-dups, dups, c.topic, c.keyPrefix, max(c.count-1, 0))
	return nil
}

// topicExists fails when topic is unknown to the brokers: a produce to it
// would wait out its timeout, or create it where auto-creation is on. prog
// is the program's name, for the hint.
func topicExists(ctx context.Context, cl *kgo.Client, topic, prog string) error {
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopics(mctx, topic)
	if err != nil {
		return fmt.Errorf("read topic metadata from Kafka: %w", err)
	}
	if d, ok := details[topic]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("topic %s does not exist: create it first (%s run consumes only existing topics), or pass --topics with another", topic, prog)
	} else if d.Err != nil {
		return fmt.Errorf("topic %s: %w", topic, d.Err)
	}
	return nil
}

// transferPayload is a demo.transfer payload (internal/demo's TransferArgs,
// which this package does not import: it would link pgx into every program
// built with workercmd; a test checks that the two agree).
type transferPayload struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// payloadFor builds the payload of job i.
func payloadFor(c enqueueConfig, i int) []byte {
	var b []byte
	switch c.typ {
	case "demo.sleep":
		b, _ = json.Marshal(SleepJob{DurationMS: int(c.sleep.Milliseconds()), Steps: c.steps})
	case "demo.transfer":
		b, _ = json.Marshal(transferPayload{From: fmt.Sprintf("acct-%d", i%c.accounts),
			To: fmt.Sprintf("acct-%d", (i+1)%c.accounts), Amount: 1})
	default:
		b, _ = json.Marshal(map[string]int{"n": i})
	}
	if pad := c.payloadSize - len(b); pad > 0 && b[len(b)-1] == '}' {
		padded := append([]byte(nil), b[:len(b)-1]...)
		if len(b) > 2 {
			padded = append(padded, ',')
		}
		padded = append(padded, `"pad":"`...)
		padded = append(padded, strings.Repeat("x", max(pad-9, 0))...)
		padded = append(padded, `"}`...)
		b = padded
	}
	return b
}

// enqueueJobs produces c.count jobs plus c.dup*c.count duplicates of random
// earlier jobs, at c.rate, drawing progress on bar. It returns the records
// produced and how many were duplicates. Each record is produced under an
// `enqueue <type>` span of tr, ended when its produce is acknowledged, so
// kotel's publish span and the consumer's job span descend from it.
func enqueueJobs(ctx context.Context, cl *kgo.Client, tr *tracing.Tracer, c enqueueConfig, bar io.Writer) (int, int, error) {
	extra := int(float64(c.count) * c.dup)
	total := c.count + extra
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	var (
		acked    atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	p := newProgress(bar, total)
	defer p.finish(func() int { return int(acked.Load()) })
	start := time.Now()
	dups := 0
	next := 0
	for sent := 0; sent < total; sent++ {
		if err := ctx.Err(); err != nil {
			return int(acked.Load()), dups, err
		}
		if c.rate > 0 {
			due := start.Add(time.Duration(float64(sent) / c.rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return int(acked.Load()), dups, ctx.Err()
				}
			}
		}
		// A duplicate once at least one job exists, with probability extra/total.
		var i int
		if next > 0 && dups < extra && (next >= c.count || rng.IntN(total) < extra) {
			i = rng.IntN(next)
			dups++
		} else {
			i = next
			next++
		}
		job := leasehold.NewJob{Type: c.typ, Key: fmt.Sprintf("%s-%d", c.keyPrefix, i), Payload: payloadFor(c, i)}
		sctx, sp := tr.StartEnqueue(ctx, job.Type, job.Key)
		r, err := enqueueRecord(sctx, job)
		if err != nil {
			sp.End(string(outcome.Error), err) //nolint:contextcheck // End counts the outcome under the span's own context
			return int(acked.Load()), dups, err
		}
		wg.Add(1)
		cl.Produce(sctx, r, func(_ *kgo.Record, err error) { //nolint:contextcheck // End counts the outcome under the span's own context
			defer wg.Done()
			if err != nil {
				sp.End(string(outcome.Error), err)
				errOnce.Do(func() { firstErr = err })
				return
			}
			sp.End(string(outcome.Enqueued), nil)
			p.set(int(acked.Add(1)))
		})
	}
	wg.Wait()
	return int(acked.Load()), dups, firstErr
}

// enqueueRecord builds the record Enqueue would produce.
func enqueueRecord(ctx context.Context, j leasehold.NewJob) (*kgo.Record, error) {
	return leasehold.KafkaRecord(ctx, j)
}

// progress draws a bar on a terminal, or a line per 10% elsewhere.
type progress struct {
	w     io.Writer
	total int
	tty   bool
	mu    sync.Mutex
	last  time.Time
	step  int
	start time.Time
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: max(total, 1), start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) set(n int) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		if time.Since(p.last) < 100*time.Millisecond && n < p.total {
			return
		}
		p.last = time.Now()
		_, _ = fmt.Fprintf(p.w, "\r%s", p.line(n))
		return
	}
	if s := n * 10 / p.total; s > p.step {
		p.step = s
		_, _ = fmt.Fprintln(p.w, p.line(n))
	}
}

func (p *progress) line(n int) string {
	const width = 30
	filled := n * width / p.total
	rate := float64(n) / max(time.Since(p.start).Seconds(), 1e-3)
	return fmt.Sprintf("[%s%s] %d/%d %.0f/s", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), n, p.total, rate)
}

func (p *progress) finish(n func() int) {
	if p.w == nil || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintf(p.w, "\r%s\n", p.line(n()))
}
