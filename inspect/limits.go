package inspect

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/limit"
)

// LimitGroup is one fleet-wide limit group (leasehold.WithConcurrencyLimit,
// WithLimitKey, WithRateLimit) as Redis holds it now.
type LimitGroup struct {
	// Group is "type:<job type>" or "key:<the group WithLimitKey derived>".
	Group string
	// Limit is the running jobs allowed at once (0: none), Rate the jobs a
	// second (0: none) and Burst the jobs that may start at once within the
	// rate, as the last worker that used the group registered them.
	Limit int
	Rate  float64
	Burst int
	// Running counts the group's live slots: jobs running now, and slots of
	// workers that died, until one lease TTL after their last renewal.
	Running int
	// HeldUntil is when a Retry-After hold of the group ends; zero when the
	// group is not held.
	HeldUntil time.Time
	// LastUsed is when a worker last took, or was refused, a slot of the
	// group (registered once a renew round), or, while a job of the group
	// runs, at most 6 hours ago.
	LastUsed time.Time
	// Slots lists the running slots (at most 1000).
	Slots []LimitSlot
}

// LimitSlot is one running slot of a limit group.
type LimitSlot struct {
	Key      string    // the job's idempotency key
	Holder   string    // the worker instance that holds it
	Deadline time.Time // when it lapses without a renewal
}

// Limits returns the limit groups named, or with none named every group a
// worker has used in the last 24 hours (sorted by name). A group is listed
// from the first renew round of a worker that used it; workers drop a
// group no worker used for 24 hours, and list it again when one uses it.
//
// A group is named as [LimitGroup.Group] shows it: "type:<job type>",
// "key:<group>" (one longer than 256 bytes is kept under its SHA-256, as
// the workers keep it), or "sha256:<hex>"; another name is refused with
// [ErrBadGroup], here and in [Inspector.HoldLimit] and
// [Inspector.ReleaseLimitHold].
func (i *Inspector) Limits(ctx context.Context, groups ...string) ([]LimitGroup, error) {
	names := make([]string, len(groups))
	for n, g := range groups {
		name, err := groupName(g)
		if err != nil {
			return nil, err
		}
		names[n] = name
	}
	in, err := limit.Read(ctx, i.rdb, i.cfg.prefix, names...)
	if err != nil {
		return nil, err
	}
	out := make([]LimitGroup, len(in))
	for n, g := range in {
		lg := LimitGroup{Group: g.Group, Limit: g.Spec.Limit, Rate: g.Spec.Rate, Burst: g.Spec.Burst,
			Running: g.Running, HeldUntil: g.HeldTill, LastUsed: g.Seen}
		for _, s := range g.Slots {
			key, holder := s.Member, ""
			if j := strings.LastIndexByte(s.Member, '|'); j >= 0 {
				key, holder = s.Member[:j], s.Member[j+1:]
			}
			lg.Slots = append(lg.Slots, LimitSlot{Key: key, Holder: holder, Deadline: s.Deadline})
		}
		out[n] = lg
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Group < out[b].Group })
	return out, nil
}

// HoldLimit holds every job of group for d across the fleet, as a handler's
// RetryAfter does: workers claim none of them until the hold ends (running
// ones finish). A longer hold in place stays. It returns the hold left. A d
// that is not positive is refused with [ErrBadHold].
func (i *Inspector) HoldLimit(ctx context.Context, group string, d time.Duration) (time.Duration, error) {
	name, err := groupName(group)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%w: %s", ErrBadHold, d)
	}
	left, err := limit.Hold(ctx, i.rdb, i.cfg.prefix, name, d)
	if err != nil {
		return 0, err
	}
	i.cfg.logger.Warn("limit group held by operator", slog.String("group", group), slog.Duration("for", left))
	return left, nil
}

// ReleaseLimitHold ends group's hold at once. It reports whether the group
// was held.
func (i *Inspector) ReleaseLimitHold(ctx context.Context, group string) (bool, error) {
	name, err := groupName(group)
	if err != nil {
		return false, err
	}
	was, err := limit.Unhold(ctx, i.rdb, i.cfg.prefix, name)
	if err != nil {
		return false, err
	}
	i.cfg.logger.Warn("limit group hold released by operator", slog.String("group", group), slog.Bool("was_held", was))
	return was, nil
}

// groupName returns the name the workers keep group under (limit.Name), or
// ErrBadGroup for a name no worker forms: a group without its kind, or an
// empty one.
func groupName(group string) (string, error) {
	kind, rest, _ := strings.Cut(group, ":")
	switch {
	case (kind == "type" || kind == "key") && rest != "":
		return limit.Name(group), nil
	case kind == "sha256" && len(rest) == 64 && isHex(rest):
		return group, nil
	}
	return "", fmt.Errorf("%w %q: want type:<job type>, key:<group> or sha256:<hex>, as limits lists them", ErrBadGroup, group)
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
