package main

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// link is one client's network, which a fault can cut for good (a process
// killed with SIGKILL: the broker sees its connections close), cut for a
// while (a network partition: the same client talks again afterwards) or
// freeze (a process SIGSTOPped: its connections stay open, nothing moves on
// them, and its handlers stop too).
type link struct {
	mu       sync.Mutex
	dead     bool
	cutUntil time.Time
	frozen   chan struct{} // non-nil while frozen, closed at the thaw
	conns    []net.Conn
}

var errCut = errors.New("cut off")

func (l *link) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	l.wait()
	if l.refused() {
		return nil, errCut
	}
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns = append(l.conns, conn)
	l.mu.Unlock()
	if l.refused() {
		_ = conn.Close()
		return nil, errCut
	}
	return &gateConn{Conn: conn, l: l}, nil
}

func (l *link) refused() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead || time.Now().Before(l.cutUntil)
}

// cut closes every connection and refuses new ones, for good (d 0) or
// for d.
func (l *link) cut(d time.Duration) {
	l.mu.Lock()
	if d == 0 {
		l.dead = true
	} else {
		l.cutUntil = time.Now().Add(d)
	}
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// freeze stops all traffic and the handlers for d.
func (l *link) freeze(d time.Duration) {
	ch := make(chan struct{})
	l.mu.Lock()
	l.frozen = ch
	l.mu.Unlock()
	time.AfterFunc(d, func() {
		l.mu.Lock()
		l.frozen = nil
		l.mu.Unlock()
		close(ch)
	})
}

// wait blocks while the link is frozen.
func (l *link) wait() {
	l.mu.Lock()
	ch := l.frozen
	l.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// gateConn holds reads and writes while its link is frozen.
type gateConn struct {
	net.Conn
	l *link
}

func (g *gateConn) Read(b []byte) (int, error) {
	n, err := g.Conn.Read(b)
	g.l.wait()
	return n, err
}

func (g *gateConn) Write(b []byte) (int, error) {
	g.l.wait()
	return g.Conn.Write(b)
}
