// Package httpserve builds the module's HTTP servers (the worker's /metrics,
// /healthz and /readyz, the console, the payment stub) with the same bounds,
// so that a slow or idle client cannot hold a connection or a goroutine for
// long: a request must arrive whole within the read timeout, an answer must be
// written within the write timeout, an idle keep-alive is closed after the
// idle timeout, headers are capped, and a request body is cut at a size.
package httpserve

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Defaults of the options. The write timeout bounds a whole answer, so it is
// long enough for a large /metrics scrape (Prometheus's own scrape timeout is
// 10s by default) and for a console read that waits its 10s on Redis.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxBodyBytes      = 1 << 20
)

type cfg struct {
	readHeader, read, write, idle time.Duration
	maxHeader                     int
	maxBody                       int64
	base                          context.Context
}

// Opt changes one of a server's bounds.
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

// WithReadHeaderTimeout bounds the time to read a request's headers.
// Default DefaultReadHeaderTimeout (5s).
func WithReadHeaderTimeout(d time.Duration) Opt { return optFunc(func(c *cfg) { c.readHeader = d }) }

// WithReadTimeout bounds the time to read a whole request, body included: a
// body that trickles in is cut when it runs out. Default DefaultReadTimeout
// (15s).
func WithReadTimeout(d time.Duration) Opt { return optFunc(func(c *cfg) { c.read = d }) }

// WithWriteTimeout bounds the time from the end of a request's headers to
// the end of its answer: a client that never reads is dropped when it runs
// out. Default DefaultWriteTimeout (30s).
func WithWriteTimeout(d time.Duration) Opt { return optFunc(func(c *cfg) { c.write = d }) }

// WithIdleTimeout bounds how long a keep-alive connection waits for its
// next request. Default DefaultIdleTimeout (60s).
func WithIdleTimeout(d time.Duration) Opt { return optFunc(func(c *cfg) { c.idle = d }) }

// WithMaxHeaderBytes caps the size of a request's headers (431 past it).
// Default DefaultMaxHeaderBytes (64 KiB).
func WithMaxHeaderBytes(n int) Opt { return optFunc(func(c *cfg) { c.maxHeader = n }) }

// WithMaxBodyBytes caps what a handler can read of a request body: a read
// past it fails (http.MaxBytesReader) and the connection is closed after the
// answer. Default DefaultMaxBodyBytes (1 MiB).
func WithMaxBodyBytes(n int64) Opt { return optFunc(func(c *cfg) { c.maxBody = n }) }

// WithBaseContext makes ctx the parent of every request's context, so that
// handlers see the server's end. Default context.Background().
func WithBaseContext(ctx context.Context) Opt { return optFunc(func(c *cfg) { c.base = ctx }) }

// New returns a server for h with the bounds above.
func New(h http.Handler, opts ...Opt) *http.Server {
	c := cfg{readHeader: DefaultReadHeaderTimeout, read: DefaultReadTimeout, write: DefaultWriteTimeout,
		idle: DefaultIdleTimeout, maxHeader: DefaultMaxHeaderBytes, maxBody: DefaultMaxBodyBytes}
	for _, o := range opts {
		o.apply(&c)
	}
	srv := &http.Server{
		Handler:           limitBody(h, c.maxBody),
		ReadHeaderTimeout: c.readHeader,
		ReadTimeout:       c.read,
		WriteTimeout:      c.write,
		IdleTimeout:       c.idle,
		MaxHeaderBytes:    c.maxHeader,
	}
	if c.base != nil {
		srv.BaseContext = func(net.Listener) context.Context { return c.base }
	}
	return srv
}

// limitBody bounds every request body that h reads.
func limitBody(h http.Handler, n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, n)
		}
		h.ServeHTTP(w, r)
	})
}
