package chaos

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// Direction names which way traffic is cut on a [Link].
type Direction int

const (
	// ToServer cuts what the worker sends: requests never arrive.
	ToServer Direction = 1 << iota
	// FromServer cuts what the server sends: requests arrive and run,
	// their replies never come back.
	FromServer
	// Both cuts both ways.
	Both = ToServer | FromServer
)

func (d Direction) String() string {
	switch d {
	case ToServer:
		return "to-server"
	case FromServer:
		return "from-server"
	case Both:
		return "both"
	}
	return fmt.Sprintf("direction(%d)", int(d))
}

// Tap observes the bytes a [Link] forwards on one connection, in order,
// with the time they crossed it: Request is called just before bytes from
// the worker are written to the server, Reply just after bytes from the
// server were read (before a cut may hold them back). Close is called
// once, when the connection ends. The two directions run in two goroutines.
type Tap interface {
	Request(p []byte, at time.Time)
	Reply(p []byte, at time.Time)
	Close()
}

// Link is a TCP proxy between one worker and one server that can blackhole
// traffic the way a network partition does, not the way a stopped server
// does: nothing is refused or reset. While a direction is cut, the bytes
// sent that way are held (as TCP holds unacknowledged data and retransmits
// it), so the sender sees only its own timeouts; new connections are
// accepted but go nowhere until the link heals. [Link.Heal] lets the held
// bytes through, unless their sender gave up and closed the connection
// meanwhile.
type Link struct {
	ln     net.Listener
	target string
	stop   context.CancelFunc // ends the context of the dials to the target
	tap    func() Tap         // nil: no tap
	reset  bool               // Heal resets the connections instead of delivering what they held

	mu      sync.Mutex
	cut     Direction
	healed  chan struct{} // closed while nothing is cut
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	cutFrom time.Time
}

// NewLink listens on a free 127.0.0.1 port and forwards to target. newTap,
// when not nil, gives each connection its [Tap].
func NewLink(ctx context.Context, target string, newTap func() Tap) (*Link, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: link to %s: %w", target, err)
	}
	lctx, stop := context.WithCancel(ctx)
	l := &Link{ln: ln, target: target, stop: stop, tap: newTap, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(l.healed)
	l.wg.Add(1)
	go l.accept(lctx)
	return l, nil
}

// Addr returns the link's host:port, which the worker dials instead of the
// target.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Cut blackholes direction d (added to what is already cut).
func (l *Link) Cut(d Direction) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut == 0 {
		l.healed = make(chan struct{})
		l.cutFrom = time.Now()
	}
	l.cut |= d
}

// ResetOnHeal makes Heal close every connection through the link instead of
// delivering what it held, as a middlebox that lost the connections' state
// during the partition would: the worker reconnects. Call it before use.
func (l *Link) ResetOnHeal() { l.reset = true }

// Heal lets traffic through both ways again and returns how long the link
// was cut (0 if it was not).
func (l *Link) Heal() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut == 0 {
		return 0
	}
	if l.reset {
		// Before the pipes wake up: what they hold must not get through.
		for c := range l.conns {
			_ = c.Close()
		}
	}
	l.cut = 0
	close(l.healed)
	return time.Since(l.cutFrom)
}

// Close stops the link, closing every connection through it.
func (l *Link) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.stop()
	_ = l.ln.Close()
	for c := range l.conns {
		_ = c.Close()
	}
	if l.cut != 0 {
		l.cut = 0
		close(l.healed)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// wait blocks while any direction in d is cut, or until done is closed; it
// reports whether the traffic may flow.
func (l *Link) wait(d Direction, done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		cut, healed, closed := l.cut&d != 0, l.healed, l.closed
		l.mu.Unlock()
		if closed {
			return false
		}
		if !cut {
			return true
		}
		select {
		case <-healed:
		case <-done:
			return false
		}
	}
}

func (l *Link) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		l.conns[c] = struct{}{}
	}
	return true
}

func (l *Link) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(l.conns, c)
	}
}

func (l *Link) accept(ctx context.Context) {
	defer l.wg.Done()
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(in) {
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.serve(ctx, in)
		}()
	}
}

// serve connects in to the target once nothing is cut (a connection made
// during a partition hangs: its handshake would not get through) and
// pipes both ways until either side ends.
func (l *Link) serve(ctx context.Context, in net.Conn) {
	done := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(done) }) }
	if !l.wait(Both, nil) {
		l.untrack(in)
		return
	}
	var d net.Dialer
	out, err := d.DialContext(ctx, "tcp", l.target)
	if err != nil {
		l.untrack(in)
		return
	}
	if !l.track(out) {
		l.untrack(in)
		return
	}
	var tap Tap
	if l.tap != nil {
		tap = l.tap()
	}
	var pipes sync.WaitGroup
	pipes.Go(func() { l.pipe(in, out, ToServer, tap, done); end(); l.untrack(in, out) })
	pipes.Go(func() { l.pipe(out, in, FromServer, tap, done); end(); l.untrack(in, out) })
	pipes.Wait()
	if tap != nil {
		tap.Close()
	}
}

// pipe copies src to dst in direction d, holding the bytes while d is cut.
// What a read returned when the cut began (bytes, or the end of the
// connection: the server restarted during a partition) is held too: the
// far side learns of it only once the link heals.
func (l *Link) pipe(src, dst net.Conn, d Direction, tap Tap, done <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		if !l.wait(d, done) {
			return
		}
		n, rerr := src.Read(buf)
		if n > 0 && tap != nil && d == FromServer {
			tap.Reply(buf[:n], time.Now())
		}
		if !l.wait(d, done) {
			return
		}
		if n > 0 {
			if tap != nil && d == ToServer {
				tap.Request(buf[:n], time.Now())
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}
