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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/tracing"
)

// actionRequest is the JSON body of POST api/actions/{action}.
type actionRequest struct {
	Key    string `json:"key"`
	Fence  string `json:"fence,omitempty"`  // expire: the lease's fence the operator saw; another is refused
	Force  bool   `json:"force,omitempty"`  // reset: also end a live lease
	Reason string `json:"reason,omitempty"` // replay: only records of this reason
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
		"expire": c.expire, "reset": c.reset, "retry": c.retry, "replay": c.replay,
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

// expire ends the key's lease now, as `worker expire` does, but only the
// lease of the fence the operator saw (a WATCH transaction): its holder
// loses it at its next renewal, its saga is compensated, and the next claim
// is a takeover.
func (c *Console) expire(ctx context.Context, req actionRequest) (actionResult, error) {
	be, err := c.backend(ctx)
	if err != nil {
		return actionResult{}, err
	}
	lk := be.m.Key(be.s.LeaseName(req.Key))
	var fence string
	err = c.cfg.Redis.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.HMGet(ctx, lk, "tok", "fen").Result()
		if err != nil {
			return err
		}
		tok, _ := v[0].(string)
		fence, _ = v[1].(string)
		switch {
		case tok == "":
			return &conflictError{"no lease is held on " + req.Key}
		case req.Fence != "" && req.Fence != fence:
			return &conflictError{fmt.Sprintf("the lease of %s changed (fence %s, not %s): look again", req.Key, fence, req.Fence)}
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.PExpire(ctx, lk, time.Millisecond)
			return nil
		})
		return err
	}, lk)
	if errors.Is(err, redis.TxFailedErr) {
		err = &conflictError{"the lease of " + req.Key + " changed while expiring it: look again"}
	}
	if err != nil {
		return actionResult{}, err
	}
	if f, err := strconv.ParseUint(fence, 10, 64); err == nil {
		c.seen.add(req.Key, f)
	}
	return actionResult{Outcome: "expired", Message: "expired the lease of " + req.Key + " (fence " + fence +
		"): its holder loses it at its next renewal and its saga is compensated"}, nil
}

func (c *Console) reset(ctx context.Context, req actionRequest) (actionResult, error) {
	r, err := c.view.Reset(ctx, req.Key, req.Force)
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
	if c.cfg.Compensations == nil {
		return actionResult{}, &conflictError{"no compensation handlers registered in this console (Config.Compensations)"}
	}
	be, err := c.backend(ctx)
	if err != nil {
		return actionResult{}, err
	}
	n, err := be.comp.Retry(ctx, req.Key)
	switch {
	case n == 0 && err == nil:
		return actionResult{}, &conflictError{"no dead-lettered compensation for " + req.Key}
	case err != nil:
		return actionResult{}, fmt.Errorf("retried %d journals of %s: %w", n, req.Key, err)
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
