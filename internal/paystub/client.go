package paystub

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client calls a stub provider over HTTP.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client of the provider at baseURL (e.g.
// "http://127.0.0.1:8099"). A nil hc uses a client with a 10s timeout.
func NewClient(baseURL string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: cmp.Or(hc, &http.Client{Timeout: 10 * time.Second})}
}

// Charge charges amount to account under the idempotency id: repeating a
// charge with the same id charges once.
func (c *Client) Charge(ctx context.Context, id, account string, amount int64) error {
	return c.post(ctx, "charge", "/charges", chargeReq{ID: id, Account: account, Amount: amount})
}

// Refund refunds the charge with chargeID; refunding twice refunds once. It
// returns an error wrapping [ErrNoCharge] when no such charge exists.
func (c *Client) Refund(ctx context.Context, chargeID string) error {
	return c.post(ctx, "refund", "/refunds", refundReq{ChargeID: chargeID})
}

// Ledger fetches the provider's ledger.
func (c *Client) Ledger(ctx context.Context) (Ledger, error) {
	var l Ledger
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/ledger", nil)
	if err != nil {
		return l, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return l, fmt.Errorf("paystub: ledger: %w (%w)", err, ErrUnavailable)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return l, &StatusError{Op: "ledger", Status: resp.StatusCode}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&l); err != nil {
		return l, fmt.Errorf("paystub: ledger: %w", err)
	}
	return l, nil
}

func (c *Client) post(ctx context.Context, op, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("paystub: %s: %w (%w)", op, err, ErrUnavailable)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyBytes))
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
		return nil
	}
	return &StatusError{Op: op, Status: resp.StatusCode}
}
