package testkit

import (
	"context"
	"net"
	"os"
	"sync"
	"time"
)

// Gate cuts one client off the network the way a partition or a frozen
// process does, without refusing anything: while it is frozen, dials wait,
// and reads and writes on connections made through it block (a reply already
// on its way is held back), so the client sees only its own timeouts. Thaw
// lets the held traffic through, as TCP would after a partition heals.
//
// Use [Gate.DialContext] as the client's dialer: kgo.Dialer for franz-go,
// redis.Options.Dialer for go-redis. Deadlines set on a connection are kept:
// a blocked read or write returns os.ErrDeadlineExceeded at its deadline.
type Gate struct {
	mu     sync.Mutex
	thawed chan struct{} // closed while not frozen
}

// NewGate returns an open gate.
func NewGate() *Gate {
	g := &Gate{thawed: make(chan struct{})}
	close(g.thawed)
	return g
}

// Freeze makes every connection through the gate hang until Thaw.
func (g *Gate) Freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.thawed:
		g.thawed = make(chan struct{})
	default: // already frozen
	}
}

// Thaw lets traffic through again.
func (g *Gate) Thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.thawed:
	default:
		close(g.thawed)
	}
}

func (g *Gate) wait(ctx context.Context, deadline time.Time, closed <-chan struct{}) error {
	g.mu.Lock()
	thawed := g.thawed
	g.mu.Unlock()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-thawed:
		return nil
	case <-timeout:
		return os.ErrDeadlineExceeded
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return net.ErrClosed
	}
}

// DialContext dials addr (waiting while the gate is frozen) and returns a
// connection that hangs whenever the gate is frozen.
func (g *Gate) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	deadline, _ := ctx.Deadline()
	if err := g.wait(ctx, deadline, nil); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gateConn{Conn: c, g: g, closed: make(chan struct{})}, nil
}

type gateConn struct {
	net.Conn
	g         *Gate
	closeOnce sync.Once
	closed    chan struct{}

	mu              sync.Mutex
	readDL, writeDL time.Time
}

func (c *gateConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	// A reply that arrived while frozen is held back until the thaw.
	c.mu.Lock()
	dl := c.readDL
	c.mu.Unlock()
	if werr := c.g.wait(context.Background(), dl, c.closed); werr != nil {
		return 0, werr
	}
	return n, err
}

func (c *gateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	dl := c.writeDL
	c.mu.Unlock()
	if err := c.g.wait(context.Background(), dl, c.closed); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *gateConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *gateConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDL, c.writeDL = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *gateConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDL = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *gateConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.writeDL = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}
