// Command transfer runs transfers as sagas: each charges the payer at a
// payment provider (an effect outside our database, undone by a registered
// compensation, a refund) and then credits the payee's account in
// PostgreSQL under a fence guard, which refuses a write that carries an
// older fence than one already written.
//
// It needs Redis (REDIS_URL, default redis://127.0.0.1:6379) and PostgreSQL
// (PG_URL, default postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
// and starts an in-process Kafka (franz-go's kfake):
//
//	go run ./examples/transfer
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/fence"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	redisURL := cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379")
	pgURL := cmp.Or(os.Getenv("PG_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err := run(ctx, os.Stdout, redisURL, pgURL); err != nil {
		fmt.Fprintln(os.Stderr, "transfer:", err)
		os.Exit(1)
	}
}

// transfer is the payload of a transfer job: charge From at the provider,
// credit To in the database.
type transfer struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// refundArgs are the arguments journaled with the charge step, so that any
// process can run the refund by name after a crash.
type refundArgs struct {
	ChargeID string `json:"charge_id"`
}

const topic = "transfer.jobs"

// run sets up the tables, runs two transfers (one succeeds, one is
// compensated), replays a late write with an older fence against the guard,
// prints the balances and drops the tables.
func run(ctx context.Context, out io.Writer, redisURL, pgURL string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	say := log.New(out, "", 0)

	db, drop, err := openSchema(ctx, pgURL)
	if err != nil {
		return err
	}
	defer drop()
	if err := migrate(ctx, db); err != nil {
		return err
	}

	kafka, err := kfake.NewCluster(kfake.SeedTopics(1, topic, topic+".dlq"))
	if err != nil {
		return fmt.Errorf("start the embedded Kafka: %w", err)
	}
	defer kafka.Close()
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s does not answer (start one, or set REDIS_URL): %w", opts.Addr, err)
	}

	// The worker's keys go under a prefix of this run's own, deleted at the
	// end (and kept at most a minute after they were last written).
	prefix := "transfer:" + strings.ToLower(rand.Text()[:8]) + ":"
	defer func() {
		if err := deleteKeys(context.WithoutCancel(ctx), rdb, prefix); err != nil {
			say.Printf("cleanup: %v", err)
		}
	}()

	// Compensations are registered by name, in every process that runs
	// workers: the journal stores the name and the arguments, never a
	// closure, so whichever process finds the journal can undo the step.
	// The handle that registering returns types the step's arguments.
	pay := &provider{say: say, charges: map[string]*charge{}}
	reg := compensation.NewRegistry()
	refund, err := compensation.RegisterUndo(reg, "payments.refund", func(ctx context.Context, a refundArgs) error {
		return pay.Refund(a.ChargeID)
	})
	if err != nil {
		return err
	}

	done := make(chan string, 4) // keys whose job finished, either way
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers(kafka.ListenAddrs()...)),
		leasehold.WithTopics(topic),
		leasehold.WithGroup("transfer"),
		leasehold.WithKeyPrefix(prefix),
		leasehold.WithRetention(time.Minute),
		leasehold.WithCompensation(reg, compensation.WithRetention(time.Minute, time.Minute)),
		leasehold.WithHooks(leasehold.Hooks{
			OnCompensated: func(_ context.Context, job *leasehold.Job, err error) {
				say.Printf("worker:   compensated the steps of %s (err %v)", job.Key, err)
			},
			OnDeadLetter: func(_ context.Context, info leasehold.ClaimInfo, reason string, _ error) {
				say.Printf("worker:   %s dead-lettered (%s)", info.Key, reason)
			},
			OnDone: func(_ context.Context, job *leasehold.Job, _ []byte, err error) {
				if err != nil {
					say.Printf("worker:   %s failed: %v", job.Key, err)
				} else {
					say.Printf("worker:   %s completed", job.Key)
				}
				done <- job.Key
			},
		}),
	)
	if err != nil {
		return err
	}
	err = w.Register("transfer", leasehold.Typed(func(ctx context.Context, job *leasehold.Job, t transfer) (string, error) {
		// Step 1, a saga step: the intent (refund this charge) is
		// journaled before the charge runs. If the job later fails, or
		// loses its lease, the worker runs the refund. Each owner of the
		// key charges under its own fence, so that a zombie's charge is
		// refunded on its own.
		chargeID := job.Key + "/" + strconv.FormatUint(job.Fence(), 10)
		err := leasehold.StepWith(ctx, job, "charge", func(context.Context) error {
			return pay.Charge(chargeID, t.From, t.Amount)
		}, refund, refundArgs{ChargeID: chargeID})
		if err != nil {
			return "", err
		}
		// Step 2, fenced: the credit lands only if no newer owner of the
		// key has written.
		if err := credit(ctx, db, job.Key, job.Fence(), t); err != nil {
			return "", err
		}
		say.Printf("handler:  %s credited %d to %s (fence %d)", job.Key, t.Amount, t.To, job.Fence())
		return chargeID, nil
	}))
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer func() {
		if err := w.Shutdown(context.WithoutCancel(ctx)); err != nil {
			say.Printf("shutdown: %v", err)
		}
	}()

	producer, err := kgo.NewClient(kgo.SeedBrokers(kafka.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer producer.Close()
	// One transfer after the other, so that the output reads in order.
	for _, job := range []leasehold.NewJob{
		{Type: "transfer", Key: "transfer-1", Payload: []byte(`{"from":"ada","to":"bob","amount":30}`)},
		// No account "zed": the credit fails after the charge, for good.
		{Type: "transfer", Key: "transfer-2", Payload: []byte(`{"from":"ada","to":"zed","amount":50}`)},
	} {
		say.Printf("producer: %s %s", job.Key, job.Payload)
		if _, err := leasehold.Enqueue(ctx, producer, job); err != nil {
			return err
		}
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", job.Key, context.Cause(ctx))
		}
	}

	// A process that held transfer-1 before (an older fence) and was paused
	// wakes up now and tries its write. The guard refuses it.
	newest, err := fence.Current(ctx, db, "transfer:transfer-1")
	if err != nil {
		return err
	}
	err = credit(ctx, db, "transfer-1", newest-1, transfer{From: "ada", To: "bob", Amount: 30})
	say.Printf("zombie:   transfer-1 with fence %d: %v (errors.Is(err, fence.ErrStaleFence) = %t)",
		newest-1, err, errors.Is(err, fence.ErrStaleFence))

	var bob int64
	if err := db.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 'bob'`).Scan(&bob); err != nil {
		return err
	}
	say.Printf("result:   bob's balance %d, ada charged %d in all", bob, pay.Net("ada"))
	return nil
}

// credit records the transfer and credits the payee in one transaction,
// guarded by the fence: fence.Write begins the transaction, applies the
// fence for the resource (refusing an older one with fence.ErrStaleFence),
// runs the statements and commits. The transfer row is keyed by the job's
// key, so that an owner which repeats a committed write (it crashed before
// recording the job's result) credits nothing twice.
func credit(ctx context.Context, db *pgxpool.Pool, key string, f uint64, t transfer) error {
	return fence.Write(ctx, db, "transfer:"+key, f, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO transfers (key, fence, account, amount)
			VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING`, key, int64(f), t.To, t.Amount) //nolint:gosec // fence.Write refuses fences beyond int64
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		tag, err = tx.Exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, t.Amount, t.To)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			// No retry can fix this: fail the job for good, which
			// compensates its steps and dead-letters the record.
			return leasehold.Permanent(fmt.Errorf("no account %q", t.To))
		}
		return nil
	})
}

// openSchema connects to PostgreSQL with a schema of its own as the search
// path, and returns a function that drops the schema and closes the pool.
func openSchema(ctx context.Context, url string) (*pgxpool.Pool, func(), error) {
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("PostgreSQL does not answer (start it, or set PG_URL): %w", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	schema := pgx.Identifier{"transfer_example_" + strings.ToLower(rand.Text()[:8])}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, err
	}
	dropSchema := func() {
		ctx := context.WithoutCancel(ctx)
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = conn.Close(ctx)
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		dropSchema()
		return nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		dropSchema()
		return nil, nil, err
	}
	return db, func() { db.Close(); dropSchema() }, nil
}

// migrate creates the fence table and the example's tables, and opens
// bob's account.
func migrate(ctx context.Context, db *pgxpool.Pool) error {
	if err := fence.Migrate(ctx, db); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `
		CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE transfers (key text PRIMARY KEY, fence bigint NOT NULL, account text NOT NULL, amount bigint NOT NULL);
		INSERT INTO accounts VALUES ('bob', 100);`)
	return err
}

// provider stands for an external payment provider: its effects are
// outside our database, so no fence can guard them; a compensation undoes
// them instead. Like real providers it takes an idempotency key (the charge
// ID), and refunding is idempotent too.
type provider struct {
	say     *log.Logger
	mu      sync.Mutex
	charges map[string]*charge // by charge ID
}

type charge struct {
	payer    string
	amount   int64
	refunded bool
}

// Charge charges payer once per charge ID.
func (p *provider) Charge(id, payer string, amount int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.charges[id]; !ok {
		p.charges[id] = &charge{payer: payer, amount: amount}
		p.say.Printf("provider: charged %s %d (charge %s)", payer, amount, id)
	}
	return nil
}

// Refund refunds a charge once. A charge that never happened (the step's
// outcome was in doubt) needs nothing.
func (p *provider) Refund(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.charges[id]; ok && !c.refunded {
		c.refunded = true
		p.say.Printf("provider: refunded %s %d (charge %s)", c.payer, c.amount, id)
	}
	return nil
}

// Net returns what payer has been charged and not refunded.
func (p *provider) Net(payer string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, c := range p.charges {
		if c.payer == payer && !c.refunded {
			n += c.amount
		}
	}
	return n
}

// deleteKeys removes the example's keys (every key under prefix) once the
// worker has stopped, so that the run leaves nothing behind.
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	var keys []string
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return rdb.Unlink(ctx, keys...).Err()
}
