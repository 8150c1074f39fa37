package chaos

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// echoServer answers every line with the same line and counts the lines it
// received.
func echoServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					got.Add(1)
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String(), &got
}

func newTestLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := NewLink(t.Context(), target, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func dialLink(t *testing.T, l *Link) net.Conn {
	t.Helper()
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(t.Context(), "tcp", l.Addr())
	if err != nil {
		t.Fatalf("dial through the link: %v (a partition must not refuse)", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes line and reads the echo, giving up after wait.
func roundTrip(c net.Conn, line string, wait time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	r, err := bufio.NewReader(c).ReadString('\n')
	return r, err
}

func wantHang(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want a hang (deadline exceeded), not a refusal or a reset", err)
	}
}

// cutAfterOne dials l, makes one round trip, cuts l the d way and checks
// that a second request ("b") hangs. It returns the connection.
func cutAfterOne(t *testing.T, l *Link, d Direction) net.Conn {
	t.Helper()
	c := dialLink(t, l)
	if r, err := roundTrip(c, "a", 2*time.Second); err != nil || r != "a\n" {
		t.Fatalf("before the cut: %q, %v", r, err)
	}
	l.Cut(d)
	_, err := roundTrip(c, "b", 300*time.Millisecond)
	wantHang(t, err)
	return c
}

// readHeld reads the next line on c, as the heal releases it.
func readHeld(c net.Conn) (string, error) {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

// TestLinkBlackholesBothWays: while cut both ways, an open connection and a
// new one hang (nothing is refused or reset) and nothing reaches the server;
// after Heal the held request goes through.
func TestLinkBlackholesBothWays(t *testing.T) {
	t.Parallel()
	addr, got := echoServer(t)
	l := newTestLink(t, addr)
	cutAfterOne(t, l, Both)
	fresh := dialLink(t, l)
	_, err := roundTrip(fresh, "c", 300*time.Millisecond)
	wantHang(t, err)
	if n := got.Load(); n != 1 {
		t.Fatalf("server received %d lines during the cut, want only the one before it", n)
	}
	if d := l.Heal(); d < 600*time.Millisecond {
		t.Fatalf("Heal reports a cut of %s, want at least the 600ms the test waited", d)
	}
	if r, err := readHeld(fresh); err != nil || r != "c\n" {
		t.Fatalf("held request after the heal: %q, %v", r, err)
	}
}

// TestLinkCutFromServer: requests reach the server and run, but their
// replies are held until the heal.
func TestLinkCutFromServer(t *testing.T) {
	t.Parallel()
	addr, got := echoServer(t)
	l := newTestLink(t, addr)
	c := cutAfterOne(t, l, FromServer)
	// A cut from the server must let requests through.
	testkit.Eventually(t, 2*time.Second, "the server to receive the request sent during the cut", func() bool {
		return got.Load() == 2
	})
	l.Heal()
	if r, err := readHeld(c); err != nil || r != "b\n" {
		t.Fatalf("held reply after the heal: %q, %v", r, err)
	}
}

// TestLinkCutToServer: requests are held, so the server sees nothing until
// the heal.
func TestLinkCutToServer(t *testing.T) {
	t.Parallel()
	addr, got := echoServer(t)
	l := newTestLink(t, addr)
	c := cutAfterOne(t, l, ToServer)
	if n := got.Load(); n != 1 {
		t.Fatalf("server received %d lines, want 1", n)
	}
	l.Heal()
	if r, err := readHeld(c); err != nil || r != "b\n" {
		t.Fatalf("held request after the heal: %q, %v", r, err)
	}
}

// TestLinkResetOnHeal: with ResetOnHeal, what a cut held is never
// delivered: the connection ends at the heal, and a new one works.
func TestLinkResetOnHeal(t *testing.T) {
	t.Parallel()
	addr, got := echoServer(t)
	l := newTestLink(t, addr)
	l.ResetOnHeal()
	c := cutAfterOne(t, l, Both)
	l.Heal()
	if r, err := readHeld(c); err == nil {
		t.Fatalf("read %q after the heal, want the connection reset", r)
	}
	time.Sleep(100 * time.Millisecond)
	if n := got.Load(); n != 1 {
		t.Fatalf("server received %d lines, want only the one before the cut", n)
	}
	if r, err := roundTrip(dialLink(t, l), "c", 2*time.Second); err != nil || r != "c\n" {
		t.Fatalf("new connection after the heal: %q, %v", r, err)
	}
}
