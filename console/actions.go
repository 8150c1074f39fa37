package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/tracing"
)

// actionRequest is the JSON body of POST api/actions/{action}.
type actionRequest struct {
	Key    string `json:"key"`
	Fence  string `json:"fence,omitempty"`  // expire: the lease's fence the operator saw; another is refused
	Force  bool   `json:"force,omitempty"`  // reset: also end a live lease
	Reason string `json:"reason,omitempty"` // replay: only records of this reason; cancel: why (logged, traced)
	Type   string `json:"type,omitempty"`   // replay: only records of this job type
}

// actionResult is the answer of an action.
type actionResult struct {
	Action  string         `json:"action"`
	Key     string         `json:"key"`
	Outcome string         `json:"outcome"`
	Message string         `json:"message"`
	Replays []replayResult `json:"replays,omitempty"`
}

type replayResult struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Outcome   string `json:"outcome"`
	Hint      string `json:"hint,omitempty"`
	Error     string `json:"error,omitempty"`
}

// errConflict marks an action refused because of the state it found (409).
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

func (c *Console) serveAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if !c.cfg.Actions {
		c.fail(w, http.StatusForbidden, "actions are off: this console is read-only (start it with --actions, or Config.Actions)", nil)
		return
	}
	_, sess := c.auth.get(r)
	if sess == nil {
		c.fail(w, http.StatusUnauthorized, "sign in first", nil)
		return
	}
	if !equal(r.Header.Get(csrfHeader), sess.csrf) || !sameOrigin(r) {
		c.fail(w, http.StatusForbidden, "missing or wrong CSRF token, or a cross-origin request", nil)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		c.fail(w, http.StatusUnsupportedMediaType, "send the action as application/json", nil)
		return
	}
	var req actionRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8192)).Decode(&req); err != nil {
		c.fail(w, http.StatusBadRequest, "body", err)
		return
	}
	if err := leasehold.ValidateKey(req.Key); err != nil {
		c.fail(w, http.StatusBadRequest, "key", err)
		return
	}
	run, ok := map[string]func(context.Context, actionRequest) (actionResult, error){
		"expire": c.expire, "cancel": c.cancel, "reset": c.reset, "retry": c.retry, "replay": c.replay,
	}[action]
	if !ok {
		c.fail(w, http.StatusNotFound, "unknown action "+strconv.Quote(action), nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*timeout)
	defer cancel()
	var sp *tracing.Span
	if c.cfg.Tracer != nil {
		ctx, sp = c.cfg.Tracer.StartOperator(ctx, "console "+action, req.Key)
	}
	res, err := run(ctx, req)
	res.Action, res.Key = action, req.Key
	status, lv := http.StatusOK, slog.LevelWarn
	var ce *conflictError
	switch {
	case err == nil:
	case errors.As(err, &ce):
		status, res.Outcome, res.Message = http.StatusConflict, "refused", err.Error()
	default:
		status, lv, res.Outcome, res.Message = http.StatusServiceUnavailable, slog.LevelError, "error", oneLine(err)
	}
	c.log.Log(ctx, lv, "console action", slog.String("action", action), slog.String("key", req.Key),
		slog.String("user", sess.user), slog.String("remote", r.RemoteAddr), slog.String("outcome", res.Outcome),
		slog.String("message", res.Message))
	sp.End(res.Outcome, err) //nolint:contextcheck // the span ends with the request; it has no context of its own to take
	writeJSON(w, status, res)
}

// expire ends the key's lease now, as `worker expire` does (the same
// Inspector action), but only the lease of the fence the operator saw: its
// holder loses it at its next renewal, its saga is compensated, and the next
// claim is a takeover.
func (c *Console) expire(ctx context.Context, req actionRequest) (actionResult, error) {
	var fence uint64
	if req.Fence != "" {
		f, err := strconv.ParseUint(req.Fence, 10, 64)
		if err != nil || f == 0 {
			return actionResult{}, &conflictError{"fence " + strconv.Quote(req.Fence) + ": want the lease's fence as shown"}
		}
		fence = f
	}
	l, err := c.in.Expire(ctx, req.Key, fence)
	switch {
	case errors.Is(err, inspect.ErrNoLease):
		return actionResult{}, &conflictError{"no lease is held on " + req.Key}
	case errors.Is(err, inspect.ErrLeaseChanged):
		return actionResult{}, &conflictError{fmt.Sprintf("the lease of %s changed (%s): look again", req.Key, oneLine(err))}
	case err != nil:
		return actionResult{}, err
	}
	c.seen.add(req.Key, l.Fence)
	return actionResult{Outcome: "expired", Message: fmt.Sprintf("expired the lease of %s (fence %d): its holder loses it "+
		"at its next renewal and its saga is compensated", req.Key, l.Fence)}, nil
}

func (c *Console) reset(ctx context.Context, req actionRequest) (actionResult, error) {
	r, err := c.in.Reset(ctx, req.Key, req.Force)
	if errors.Is(err, idempotency.ErrResetHeld) || errors.Is(err, idempotency.ErrResetClock) {
		return actionResult{}, &conflictError{oneLine(err)}
	}
	if err != nil {
		return actionResult{}, err
	}
	msg := fmt.Sprintf("forgot the %s record of %s (fence %d); its next delivery runs again", r.State, req.Key, r.Fence)
	if r.LeaseEnded {
		msg += "; its live lease was ended"
	}
	return actionResult{Outcome: "reset", Message: msg}, nil
}

func (c *Console) retry(ctx context.Context, req actionRequest) (actionResult, error) {
	n, err := c.in.RetryCompensation(ctx, req.Key)
	switch {
	case errors.Is(err, inspect.ErrNoHandlers):
		return actionResult{}, &conflictError{"no compensation handlers registered in this console (Config.Compensations)"}
	case errors.Is(err, inspect.ErrNothingToRetry):
		return actionResult{}, &conflictError{"no dead-lettered compensation for " + req.Key}
	case err != nil:
		return actionResult{}, err
	}
	return actionResult{Outcome: "compensated", Message: fmt.Sprintf("compensated %d journals of %s", n, req.Key)}, nil
}

func (c *Console) replay(ctx context.Context, req actionRequest) (actionResult, error) {
	rs, err := c.view.ReplayDeadLetters(ctx, leasehold.DeadLetterFilter{Key: req.Key, Reason: req.Reason, Type: req.Type, Limit: 100}, false)
	if err != nil {
		return actionResult{}, err
	}
	res := actionResult{Outcome: "none", Replays: make([]replayResult, 0, len(rs))}
	produced := 0
	for _, r := range rs {
		rr := replayResult{Partition: r.Partition, Offset: r.Offset, Outcome: r.Outcome, Hint: r.Hint}
		if r.Err != nil {
			rr.Error = oneLine(r.Err)
		}
		if r.Outcome == leasehold.ReplayProduced {
			produced++
		}
		res.Replays = append(res.Replays, rr)
	}
	switch {
	case len(rs) == 0:
		return actionResult{}, &conflictError{"no dead-letter record of " + req.Key}
	case produced > 0:
		res.Outcome = leasehold.ReplayProduced
	default:
		res.Outcome = rs[0].Outcome
	}
	res.Message = fmt.Sprintf("%d of %d dead-letter records of %s replayed", produced, len(rs), req.Key)
	if produced == 0 && rs[0].Hint != "" {
		res.Message += ": " + rs[0].Hint
	}
	return res, nil
}
