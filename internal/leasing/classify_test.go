package leasing_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
)

// reply is a Redis error reply, as go-redis returns it.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		down bool
	}{
		{nil, false},
		{redis.Nil, false},
		{reply("ERR user_script:1: bad"), false},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{reply("NOSCRIPT No matching script"), false},
		{reply("LOADING Redis is loading the dataset in memory"), true},
		{reply("READONLY You can't write against a read only replica."), true},
		{reply("OOM command not allowed when used memory > 'maxmemory'."), true},
		{reply("CLUSTERDOWN The cluster is down"), true},
		{reply("BUSY Redis is busy running a script."), true},
		{redis.ErrClosed, true},
		{io.EOF, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("%w: already", leasing.ErrUnavailable), true},
	} {
		got := leasing.Classify(c.err)
		if down := errors.Is(got, leasing.ErrUnavailable); down != c.down {
			t.Errorf("Classify(%v) = %v: unavailable %t, want %t", c.err, got, down, c.down)
		}
		if c.err != nil && !errors.Is(got, c.err) {
			t.Errorf("Classify(%v) = %v, which no longer matches the error it classified", c.err, got)
		}
		if c.down && errors.Is(c.err, leasing.ErrUnavailable) && got != c.err { //nolint:errorlint // the very error, not wrapped again
			t.Errorf("Classify(%v) wrapped an error that was unavailable already: %v", c.err, got)
		}
	}
}

func TestNewSentinel(t *testing.T) {
	t.Parallel()
	err := leasing.NewSentinel("pkg: narrower", leasing.ErrLost)
	if err.Error() != "pkg: narrower" {
		t.Errorf("Error() = %q, want only its own sentence", err.Error())
	}
	if !errors.Is(err, leasing.ErrLost) || errors.Is(err, leasing.ErrUnavailable) {
		t.Errorf("NewSentinel(..., ErrLost) matches the wrong parent")
	}
}

// A WRONGTYPE reply keeps its class (no outage) and names its likely causes,
// an older leasehold's lease keys among them.
func TestClassifyWrongType(t *testing.T) {
	t.Parallel()
	err := reply("WRONGTYPE Operation against a key holding the wrong kind of value")
	got := leasing.Classify(err)
	if !errors.Is(got, err) || errors.Is(got, leasing.ErrUnavailable) {
		t.Fatalf("Classify(%v) = %v, want the same reply, not an outage", err, got)
	}
	if !strings.Contains(got.Error(), "before lease keys became strings") {
		t.Fatalf("Classify(%v) = %q, which does not name an older leasehold's lease keys", err, got)
	}
}
