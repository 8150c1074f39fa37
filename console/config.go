package console

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/tracing"
)

// Defaults of the Config fields.
const (
	DefaultPollInterval = 2 * time.Second
	DefaultPageSize     = 50
	// DefaultScanBudget bounds the keys one count of the leases looks at
	// (SCAN calls of COUNT 1000): past it the overview shows "at least".
	DefaultScanBudget = 200_000
	// DefaultDeadLetterScan and DefaultDeadLetterScanBytes bound the
	// dead-letter records one request reads, matching its filter or not:
	// past either the page stops early, with a cursor to continue from.
	DefaultDeadLetterScan      = 5000
	DefaultDeadLetterScanBytes = 16 << 20
)

// Config configures a console. Redis is required; every other field has a
// default or turns a view off when empty. Use the workers' own settings
// (prefix, topics, group, dead-letter topic): the console reads what they
// write.
type Config struct {
	// Redis is the workers' Redis (a *redis.Client or *redis.ClusterClient).
	Redis redis.UniversalClient
	// KeyPrefix is the workers' key prefix. Default "lh:".
	KeyPrefix string
	// Kafka are franz-go options to reach the brokers (seed brokers, TLS,
	// SASL), for commit lag, the dead-letter topic and replays. Default: the
	// Worker's client when Worker is set and started, else no Kafka views.
	Kafka []kgo.Opt
	// Topics the workers consume. Default leasehold.DefaultTopic.
	Topics []string
	// DLQ is the dead-letter topic. Default: the first topic + ".dlq".
	DLQ string
	// Group is the workers' consumer group. Default leasehold.DefaultGroup.
	Group string
	// JaegerURL is the base URL of the Jaeger UI (http://host:16686); trace
	// links search it for the key's spans. Default: no trace links.
	JaegerURL string
	// JaegerService is the service name the workers trace under. Default
	// tracing.DefaultServiceName.
	JaegerService string
	// Actions turns on expire, reset, compensation retry and dead-letter
	// replay; they need Auth. Default false: read-only, every action
	// answers 403.
	Actions bool
	// Auth is who may run actions. Default none (then Actions must be off).
	Auth Auth
	// SecureCookie marks the session cookie Secure on every sign-in, for a
	// console behind a TLS-terminating proxy: the console itself then sees
	// plain HTTP, and without it sets Secure only on requests it receives
	// over TLS. Headers such as X-Forwarded-Proto are not trusted for this:
	// a client can send them. Default false.
	SecureCookie bool
	// Compensations holds the compensation handlers, for retrying
	// dead-lettered compensations. Default nil: no retry.
	Compensations *compensation.Registry
	// StoreOptions are the workers' idempotency store options (shards,
	// stated maxmemory-policy, ...). Default none.
	StoreOptions []idempotency.Opt
	// Worker, when the console is mounted in a worker process, adds what
	// only the process knows: its counters (jobs per second by outcome,
	// takeovers, leases lost) and its running jobs' types and start times.
	// Default nil: a standalone console, which says on the page what it
	// cannot show.
	Worker *leasehold.Worker
	// Logger logs actions (WARN) and failed reads. Default: discard.
	Logger *slog.Logger
	// Tracer traces each action as a span "console <action>". Default none.
	Tracer *tracing.Tracer
	// PollInterval is how often an open page asks for fresh data, and how
	// long the server reuses a snapshot for every page. Default 2s.
	PollInterval time.Duration
	// PageSize is how many running jobs one page lists. Default 50.
	PageSize int
	// ScanBudget bounds the keys a count of the held leases looks at.
	// Default DefaultScanBudget.
	ScanBudget int
	// DeadLetterScan and DeadLetterScanBytes bound the records, and their
	// bytes, that one request of the dead-letter view reads from Kafka,
	// matching its filter or not: a page stops at either, with fewer
	// records (none, when nothing matched) and a cursor that continues the
	// read. One such read runs at a time; a request that finds one running
	// waits up to 2 s, then gets 503 with Retry-After. Defaults
	// DefaultDeadLetterScan and DefaultDeadLetterScanBytes.
	DeadLetterScan      int
	DeadLetterScanBytes int64
	// AllowedHosts are the names the console answers for, matched against
	// each request's Host header: "host" (any port) or "host:port"; "*"
	// turns the check off (when a proxy in front checks Host). A request
	// for another host gets 421 Misdirected Request, so that a page whose
	// name was made to resolve to the console (DNS rebinding) reads
	// nothing. localhost, 127.0.0.1 and [::1] are always allowed. Default
	// none: only those.
	AllowedHosts []string
}

// Auth says who may run actions: a bearer token, or a user and a
// password. Both are compared in constant time and never sent to the page.
type Auth struct {
	Token    string
	User     string
	Password string
}

func (a Auth) set() bool { return a.Token != "" || a.User != "" || a.Password != "" }

func (a Auth) kind() string {
	switch {
	case a.Token != "":
		return "token"
	case a.User != "":
		return "basic"
	}
	return ""
}

// AuthFromEnv reads LEASEHOLD_UI_TOKEN, or LEASEHOLD_UI_USER and
// LEASEHOLD_UI_PASSWORD, with getenv (os.Getenv).
func AuthFromEnv(getenv func(string) string) Auth {
	return Auth{Token: getenv("LEASEHOLD_UI_TOKEN"), User: getenv("LEASEHOLD_UI_USER"), Password: getenv("LEASEHOLD_UI_PASSWORD")}
}

func (c *Config) defaults() {
	c.KeyPrefix = cmp.Or(c.KeyPrefix, "lh:")
	if len(c.Topics) == 0 {
		c.Topics = []string{leasehold.DefaultTopic}
	}
	c.DLQ = cmp.Or(c.DLQ, c.Topics[0]+".dlq")
	c.Group = cmp.Or(c.Group, leasehold.DefaultGroup)
	c.JaegerService = cmp.Or(c.JaegerService, tracing.DefaultServiceName)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	c.ScanBudget = cmp.Or(c.ScanBudget, DefaultScanBudget)
	c.DeadLetterScan = cmp.Or(c.DeadLetterScan, DefaultDeadLetterScan)
	c.DeadLetterScanBytes = cmp.Or(c.DeadLetterScanBytes, DefaultDeadLetterScanBytes)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
