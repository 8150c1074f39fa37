package paystub_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/paystub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestChargeRefundLedger(t *testing.T) {
	s := paystub.New()
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := paystub.NewClient(hs.URL, hs.Client())
	ctx := t.Context()

	for range 2 {
		if err := c.Charge(ctx, "k/1", "alice", 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Charge(ctx, "k/2", "alice", 10); err != nil {
		t.Fatal(err)
	}
	if err := c.Refund(ctx, "nope"); !errors.Is(err, paystub.ErrNoCharge) {
		t.Fatalf("refund of unknown charge: %v", err)
	}
	s.FailRefunds(1)
	if err := c.Refund(ctx, "k/1"); !errors.Is(err, paystub.ErrUnavailable) {
		t.Fatalf("injected failure: %v", err)
	}
	for range 2 {
		if err := c.Refund(ctx, "k/1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Charge(ctx, "", "alice", 1); err == nil {
		t.Fatal("charge without id accepted")
	}
	got, err := c.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := paystub.Ledger{
		Charges: []paystub.Charge{
			{ID: "k/1", Account: "alice", Amount: 10, Requests: 2, Refunded: true, RefundRequests: 2},
			{ID: "k/2", Account: "alice", Amount: 10, Requests: 1},
		},
		ChargeRequests: 3, RefundRequests: 4, RefundsApplied: 1, UnknownRefunds: 1, FailedRefunds: 1,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(paystub.Charge{}, "At")); diff != "" {
		t.Errorf("ledger (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(got, s.Ledger()); diff != "" {
		t.Errorf("HTTP ledger differs from Server.Ledger:\n%s", diff)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- paystub.Serve(ctx, ln, paystub.New(), nil) }()
	c := paystub.NewClient("http://"+ln.Addr().String(), nil)
	if err := c.Charge(ctx, "x", "a", 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}
