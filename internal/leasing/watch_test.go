package leasing_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
)

// watchLog records what a Watcher is told, on channels.
type watchLog struct {
	cancelled chan struct{}
	ended     chan error
}

func newWatchLog() *watchLog {
	return &watchLog{cancelled: make(chan struct{}, 4), ended: make(chan error, 4)}
}

func (w *watchLog) LeaseCancelled()        { w.cancelled <- struct{}{} }
func (w *watchLog) LeaseEnded(cause error) { w.ended <- cause }

func (w *watchLog) waitCancelled(t *testing.T) {
	t.Helper()
	select {
	case <-w.cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("no LeaseCancelled in 30 s")
	}
}

func (w *watchLog) waitEnded(t *testing.T) error {
	t.Helper()
	select {
	case err := <-w.ended:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("no LeaseEnded in 30 s")
		return nil
	}
}

// A watcher hears of an operator's cancel from a renewal and of the lease's
// loss, with the cause the lease's context carries; each once. Watched after
// the end, it hears of it at once; unwatched, of nothing.
func TestWatch(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	m, err := leasing.NewManager(c, leasing.WithPrefix(prefix), leasing.WithTTL(900*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.WithoutCancel(ctx)) })

	l, err := m.Acquire(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	w := newWatchLog()
	leasing.Watch(l, w)
	// An operator's cancel, as lease_cancel.lua stores it.
	held := c.Get(ctx, m.Key("watched")).Val()
	if err := c.Do(ctx, "set", m.Key("watched"), held+" "+strconv.FormatUint(l.Fence(), 10), "keepttl").Err(); err != nil {
		t.Fatal(err)
	}
	w.waitCancelled(t)
	if l.Err() != nil {
		t.Fatalf("the lease ended with the cancel: %v", l.Err())
	}
	// A second watcher on a cancelled lease hears of the cancel at once.
	w2 := newWatchLog()
	leasing.Watch(l, w2)
	w2.waitCancelled(t)
	// The key stolen: the lease is lost, the (replacing) watcher told once.
	if err := c.Do(ctx, "set", m.Key("watched"), "thief 1 60000", "keepttl").Err(); err != nil {
		t.Fatal(err)
	}
	cause := w2.waitEnded(t)
	if !errors.Is(cause, leasing.ErrLost) || !errors.Is(cause, context.Cause(l.Context())) {
		t.Fatalf("cause %v, want the lease context's cause %v (an ErrLost)", cause, context.Cause(l.Context()))
	}
	select {
	case err := <-w.ended:
		t.Fatalf("the replaced watcher was told of the end: %v", err)
	case err := <-w2.ended:
		t.Fatalf("the watcher was told twice: %v", err)
	default:
	}
	// Watched after the end: told at once.
	w3 := newWatchLog()
	leasing.Watch(l, w3)
	if got := w3.waitEnded(t); !errors.Is(got, cause) {
		t.Fatalf("late watcher cause %v, want %v", got, cause)
	}

	// Unwatched: a released lease tells nobody.
	l2, err := m.Acquire(ctx, "unwatched")
	if err != nil {
		t.Fatal(err)
	}
	w4 := newWatchLog()
	leasing.Watch(l2, w4)
	leasing.Unwatch(l2)
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w4.ended:
		t.Fatalf("an unwatched lease's end was told: %v", err)
	default:
	}
	// Released while watched: told, with ErrReleased.
	l3, err := m.Acquire(ctx, "released")
	if err != nil {
		t.Fatal(err)
	}
	w5 := newWatchLog()
	leasing.Watch(l3, w5)
	if err := l3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w5.waitEnded(t); !errors.Is(got, leasing.ErrReleased) {
		t.Fatalf("release cause %v, want ErrReleased", got)
	}
}
