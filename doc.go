// Package leasehold runs long jobs that arrive on Kafka exactly once in
// effect, on top of at-least-once delivery.
//
// A [Worker] consumes a topic in a consumer group (franz-go, cooperative-sticky
// balancing). For every record it claims the record's idempotency key in Redis
// (package idempotency): the claims of one poll batch go in one pipeline. A key
// that is free is run by the registered [Handler] under an owner-tokened,
// fenced lease that one renewer goroutine keeps alive (package lease). The
// handler's result is recorded with a fenced write, so a worker that lost its
// lease cannot record anything; a duplicate of a finished key replays the
// cached result; a key another worker holds is parked and claimed again, and
// its offset is never committed while it waits.
//
// Producing:
//
//	key, err := leasehold.Enqueue(ctx, kgoClient, leasehold.NewJob{
//		Type: "video.transcode", Key: "upload-42", Payload: payload,
//	})
//
// Consuming:
//
//	w, err := leasehold.New(redisClient,
//		leasehold.WithKafka(kgo.SeedBrokers("kafka:9092")),
//		leasehold.WithTopics("jobs"))
//	w.Register("video.transcode", func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
//		var from int
//		if cp := job.LastHeartbeat(); cp != nil { // resume
//			from, _ = strconv.Atoi(string(cp))
//		}
//		for i := from; i < 100; i++ {
//			if err := step(ctx, i, job.Fence()); err != nil {
//				return nil, err
//			}
//			job.Heartbeat(ctx, []byte(strconv.Itoa(i+1)))
//		}
//		return []byte("done"), nil
//	}, leasehold.WithMaxAttempts(5))
//	err = w.Run(ctx) // until ctx is cancelled, then a graceful shutdown
//
// # Offsets
//
// Records of a partition finish out of order. The worker tracks the in-flight
// offsets of every assigned partition and marks for commit only the
// contiguous prefix of finished records; franz-go commits the marks on an
// interval, and the worker commits them, blocking, when partitions are
// revoked. Nothing is committed for partitions that are lost. A finished
// record is one that completed, was replayed as a duplicate, or was written to
// the dead-letter topic.
//
// # Failures
//
// Handler errors are retried with exponential backoff and jitter up to
// [WithMaxAttempts]; errors wrapped with [Permanent] are not. A failed job's
// last heartbeat details are flushed so the next attempt resumes from them.
// Poison records (no key, an invalid key or type, an unknown type, a payload
// too large, a payload that differs from the one first seen under its key,
// terminal failures) go to the dead-letter topic with headers naming the
// reason, the error and the original topic, partition and offset.
//
// When Redis cannot be reached the worker fails closed: it pauses fetching,
// starts no handler and moves no offset, probes Redis with backoff, and
// resumes when it answers. A job whose lease cannot be renewed until its local
// deadline is cancelled with cause [ErrLeaseLost], even while Redis is
// unreachable.
//
// # Composition
//
// [Middleware] wraps handlers (tracing, metrics, user concerns); [Hooks]
// observe claims, replays, retries, lost leases and dead letters
// (compensation runners and terminal views plug in there).
//
// # Typed values and tests
//
// [StepWith] runs a saga step with the typed undo handle that registering its
// compensation returned (compensation.RegisterUndo), so the arguments are
// checked against the handler's type at compile time; [RecordHeartbeat] and
// [LastHeartbeatAs] store and read back a checkpoint of the handler's own
// type. Package leaseholdtest runs a handler without Redis or Kafka and
// records its heartbeats, steps and outcome.
//
// # Where to look
//
// A job author writes a [Handler] over a [Job] ([Job.Heartbeat],
// [RecordHeartbeat], [LastHeartbeatAs], [Job.Fence], [StepWith], [Job.Logger]),
// returns [Permanent] for what no retry can fix, and tests it with package
// leaseholdtest. A producer calls [Enqueue] or [EnqueueBatch] with a [NewJob].
//
// A worker owner builds a [Worker] with [New] and its options ([Opt]: Kafka,
// topics, concurrency, the lease TTL, retention, telemetry with
// [WithTracerProvider], [WithMeterProvider], [WithPropagator] and
// [WithLogger]), registers handlers with job options ([JobOpt]), and runs it
// ([Worker.Run], or [Worker.Start] and [Worker.Shutdown]), watching
// [Worker.Ready], [Worker.Stats], [Worker.Running] and [Hooks]. Every
// outcome a span, metric, history entry or hook names is a name of package
// outcome.
//
// An operator reads and acts on keys, leases, journals and histories through
// [Worker.Inspector] (package inspect), which the CLI and the console
// present; [Worker.Inspect] and [Worker.Reset] are its deprecated forwards.
package leasehold
