package httpserve_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/httpserve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve serves h with opts on a free loopback port until the test ends.
func serve(t *testing.T, h http.Handler, opts ...httpserve.Opt) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserve.New(h, opts...)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestTrickledBodyIsCut: a request whose body arrives a byte at a time is
// cut by the read timeout, not held while the client keeps trickling.
func TestTrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	got := make(chan error, 1)
	addr := serve(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- err
	}), httpserve.WithReadTimeout(300*time.Millisecond))
	c := dial(t, addr)
	if _, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(10 * time.Second)
	for {
		select {
		case err := <-got:
			if err == nil {
				t.Fatal("the handler read the whole body")
			}
			return
		case <-tick.C:
			_, _ = c.Write([]byte("x")) // fails once the server has closed
		case <-giveUp:
			t.Fatal("a trickled body was still being read after 10s: no read timeout")
		}
	}
}

// TestIdleConnectionClosed: a keep-alive connection that sends no next
// request is closed by the server.
func TestIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		httpserve.WithIdleTimeout(200*time.Millisecond))
	c := dial(t, addr)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	// The server closes the idle connection: the next read ends with EOF,
	// well before this deadline.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read returned %v, want EOF (closed by the server)", err)
	}
}

// TestClientThatNeverReads: an answer the client does not read fails its
// write at the write timeout instead of holding the handler.
func TestClientThatNeverReads(t *testing.T) {
	t.Parallel()
	got := make(chan error, 1)
	chunk := []byte(strings.Repeat("m", 64<<10))
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for range 4096 { // 256 MiB: far more than the socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}), httpserve.WithWriteTimeout(300*time.Millisecond))
	c := dial(t, addr)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("256 MiB written to a client that reads nothing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler still writes to a client that never reads, after 20s: no write timeout")
	}
}

// TestLimits: headers past the cap get 431; a body past the cap fails the
// handler's read.
func TestLimits(t *testing.T) {
	t.Parallel()
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, "too large", http.StatusRequestEntityTooLarge)
				return
			}
		}
		_, _ = io.WriteString(w, "ok")
	}), httpserve.WithMaxHeaderBytes(1<<10), httpserve.WithMaxBodyBytes(100))
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("h", 8<<10))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8 KiB of headers: %s, want 431", resp.Status)
	}
	for size, want := range map[int]int{100: http.StatusOK, 101: http.StatusRequestEntityTooLarge} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/", strings.NewReader(strings.Repeat("b", size)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("body of %d bytes: %s, want %d", size, resp.Status, want)
		}
	}
}
