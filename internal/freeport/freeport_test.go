package freeport

import (
	"context"
	"net"
	"strconv"
	"testing"
)

func TestPortBelowEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := Port(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if p < floor || p >= lo {
			t.Fatalf("port %d outside %d..%d", p, floor, lo)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestPortIsBindable(t *testing.T) {
	p, err := Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("bind %d: %v", p, err)
	}
	_ = l.Close()
}

func TestPair(t *testing.T) {
	lo := ephemeralLow()
	p, err := Pair(t.Context(), 10000)
	if err != nil {
		t.Fatal(err)
	}
	if p < floor || p+10000 >= lo {
		t.Fatalf("pair %d/%d outside %d..%d", p, p+10000, floor, lo)
	}
	if !free(t.Context(), p) || !free(t.Context(), p+10000) {
		t.Fatalf("pair %d/%d not free", p, p+10000)
	}
}

func TestFreeSeesAListener(t *testing.T) {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if free(t.Context(), l.Addr().(*net.TCPAddr).Port) {
		t.Fatal("free reports a held port as free")
	}
}

func TestKernelFallback(t *testing.T) {
	defer func(f func() int) { ceilFn = f }(ceilFn)
	ceilFn = func() int { return floor + 10 }
	p, err := Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p < 1024 {
		t.Fatalf("port %d", p)
	}
}
