package main

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// link is one client's network, which a fault can cut for good (a process
// killed with SIGKILL: the broker sees its connections close), blackhole
// for a while (a network partition as the chaos run makes one, one way or
// both: nothing is refused or reset, the bytes sent the cut way are held
// and go through when the link heals, unless their connection was closed
// meanwhile), or freeze (a process SIGSTOPped: both ways held and its
// handlers stopped too).
type link struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
	toSrv chan struct{} // non-nil while requests are held; closed at the heal
	frSrv chan struct{} // non-nil while replies are held; closed at the heal
	froze chan struct{} // non-nil while the handlers are frozen; closed at the thaw
}

// The directions of a partition.
const (
	toServer   = 1
	fromServer = 2
	both       = toServer | fromServer
)

var errCut = errors.New("cut off")

func (l *link) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
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
	return &gateConn{Conn: conn, l: l, closed: make(chan struct{})}, nil
}

func (l *link) refused() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead
}

// cut closes every connection and refuses new ones, for good.
func (l *link) cut() {
	l.mu.Lock()
	l.dead = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// hold holds the traffic of dir for d; with handlers, the handlers too (a
// pause).
func (l *link) hold(dir int, d time.Duration, handlers bool) {
	chs := []*chan struct{}{}
	l.mu.Lock()
	if dir&toServer != 0 && l.toSrv == nil {
		chs = append(chs, &l.toSrv)
	}
	if dir&fromServer != 0 && l.frSrv == nil {
		chs = append(chs, &l.frSrv)
	}
	if handlers && l.froze == nil {
		chs = append(chs, &l.froze)
	}
	for _, p := range chs {
		*p = make(chan struct{})
	}
	l.mu.Unlock()
	time.AfterFunc(d, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, p := range chs {
			close(*p)
			*p = nil
		}
	})
}

func (l *link) gate(which *chan struct{}) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *which
}

// wait blocks while the handlers are frozen.
func (l *link) wait() {
	if ch := l.gate(&l.froze); ch != nil {
		<-ch
	}
}

// gateConn holds writes while requests are held and reads while replies
// are, until the heal or its own close.
type gateConn struct {
	net.Conn
	l      *link
	once   sync.Once
	closed chan struct{}
}

func (g *gateConn) hold(ch chan struct{}) error {
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-g.closed:
		return net.ErrClosed
	}
}

func (g *gateConn) Read(b []byte) (int, error) {
	n, err := g.Conn.Read(b)
	if herr := g.hold(g.l.gate(&g.l.frSrv)); herr != nil {
		return 0, herr
	}
	return n, err
}

func (g *gateConn) Write(b []byte) (int, error) {
	if err := g.hold(g.l.gate(&g.l.toSrv)); err != nil {
		return 0, err
	}
	return g.Conn.Write(b)
}

func (g *gateConn) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Conn.Close()
}
