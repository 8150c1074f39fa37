package paystub

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/httpserve"
)

// Limits on what the stub accepts and keeps.
const (
	MaxBodyBytes = 4 << 10 // request body
	MaxIDLen     = 256     // charge id and account
	MaxCharges   = 1 << 20 // charges kept in memory
)

// Charge is one charge as the provider recorded it.
type Charge struct {
	ID             string    `json:"id"`
	Account        string    `json:"account"`
	Amount         int64     `json:"amount"`
	At             time.Time `json:"at"`
	Requests       int       `json:"requests"`        // charge requests received with this id
	Refunded       bool      `json:"refunded"`        // a refund was applied
	RefundRequests int       `json:"refund_requests"` // refund requests received for this id
}

// Ledger is a snapshot of everything the stub received.
type Ledger struct {
	Charges        []Charge `json:"charges"` // in the order they were first charged
	ChargeRequests int      `json:"charge_requests"`
	RefundRequests int      `json:"refund_requests"`
	RefundsApplied int      `json:"refunds_applied"`
	UnknownRefunds int      `json:"unknown_refunds"` // refunds of a charge that does not exist
	FailedRefunds  int      `json:"failed_refunds"`  // refunds answered 503 by FailRefunds
}

// Charge returns the charge with id, if any.
func (l Ledger) Charge(id string) (Charge, bool) {
	i := slices.IndexFunc(l.Charges, func(c Charge) bool { return c.ID == id })
	if i < 0 {
		return Charge{}, false
	}
	return l.Charges[i], true
}

// Server is the stub provider; it is an http.Handler.
type Server struct {
	mux *http.ServeMux

	mu          sync.Mutex
	byID        map[string]*Charge
	order       []string
	led         Ledger
	failRefunds int
}

// New returns an empty stub provider.
func New() *Server {
	s := &Server{mux: http.NewServeMux(), byID: map[string]*Charge{}}
	s.mux.HandleFunc("POST /charges", s.charge)
	s.mux.HandleFunc("POST /refunds", s.refund)
	s.mux.HandleFunc("GET /ledger", s.ledger)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// FailRefunds makes the next n refund requests fail with 503 before they are
// looked at, to exercise compensation retries.
func (s *Server) FailRefunds(n int) {
	s.mu.Lock()
	s.failRefunds = n
	s.mu.Unlock()
}

// Ledger returns a snapshot of what the stub has received.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.led
	l.Charges = make([]Charge, 0, len(s.order))
	for _, id := range s.order {
		l.Charges = append(l.Charges, *s.byID[id])
	}
	return l
}

type chargeReq struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

type refundReq struct {
	ChargeID string `json:"charge_id"`
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		http.Error(w, "bad request body", http.StatusBadRequest)
		return false
	}
	return true
}

func (s *Server) charge(w http.ResponseWriter, r *http.Request) {
	var req chargeReq
	if !decode(w, r, &req) {
		return
	}
	if req.ID == "" || len(req.ID) > MaxIDLen || len(req.Account) > MaxIDLen || req.Amount <= 0 {
		http.Error(w, "invalid charge", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.led.ChargeRequests++
	c, ok := s.byID[req.ID]
	status := http.StatusOK
	if !ok {
		if len(s.order) >= MaxCharges {
			s.mu.Unlock()
			http.Error(w, "ledger full", http.StatusInsufficientStorage)
			return
		}
		c = &Charge{ID: req.ID, Account: req.Account, Amount: req.Amount, At: time.Now().UTC()}
		s.byID[req.ID] = c
		s.order = append(s.order, req.ID)
		status = http.StatusCreated
	}
	c.Requests++
	out := *c
	s.mu.Unlock()
	writeJSON(w, status, out)
}

func (s *Server) refund(w http.ResponseWriter, r *http.Request) {
	var req refundReq
	if !decode(w, r, &req) {
		return
	}
	if req.ChargeID == "" || len(req.ChargeID) > MaxIDLen {
		http.Error(w, "invalid refund", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.led.RefundRequests++
	if s.failRefunds > 0 {
		s.failRefunds--
		s.led.FailedRefunds++
		s.mu.Unlock()
		http.Error(w, "provider busy", http.StatusServiceUnavailable)
		return
	}
	c, ok := s.byID[req.ChargeID]
	if !ok {
		s.led.UnknownRefunds++
		s.mu.Unlock()
		http.Error(w, "no such charge", http.StatusNotFound)
		return
	}
	c.RefundRequests++
	status := http.StatusOK
	if !c.Refunded {
		c.Refunded = true
		s.led.RefundsApplied++
		status = http.StatusCreated
	}
	out := *c
	s.mu.Unlock()
	writeJSON(w, status, out)
}

func (s *Server) ledger(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Ledger())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Run serves a new stub provider on addr (host:port) until ctx is done, then
// shuts the server down gracefully.
func Run(ctx context.Context, addr string, logger *slog.Logger) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, New(), logger)
}

// ServeNew serves a new stub ([New]) on ln until ctx ends, as [Serve] does.
func ServeNew(ctx context.Context, ln net.Listener, logger *slog.Logger) error {
	return Serve(ctx, ln, New(), logger)
}

// Serve serves s on ln until ctx is done.
func Serve(ctx context.Context, ln net.Listener, s *Server, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := httpserve.New(s)
	logger.Info("payment stub listening", slog.String("addr", ln.Addr().String()))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
