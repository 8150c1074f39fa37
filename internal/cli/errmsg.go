package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

// userMessage is the one line Main prints for a command's error: for errors
// a user meets and can fix, one sentence that says the fix; for the rest,
// the error chain without the package prefixes each layer adds ("leasehold:
// ", "lease: ", ...), which read as a stutter on a terminal.
func userMessage(ctx context.Context, err error) string {
	var pe *idempotency.PolicyError
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return "interrupted before the command finished"
	case errors.As(err, &pe):
		return destutter(oneLine(pe))
	case errors.Is(err, lease.ErrEvictionPolicy), errors.Is(err, idempotency.ErrEvictionPolicy):
		return fmt.Sprintf("redis maxmemory-policy is %s, which evicts keys under memory pressure: a lease could vanish "+
			"and a job run twice; set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)",
			evictionPolicy(err))
	}
	return destutter(oneLine(err))
}

// evictionPolicy returns the policy named at the end of an eviction error
// ("...evicts keys: allkeys-lru"), or "an evicting policy".
func evictionPolicy(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		if p := strings.TrimSpace(msg[i+2:]); strings.HasPrefix(p, "allkeys-") || strings.HasPrefix(p, "volatile-") {
			return p
		}
	}
	return "an evicting policy"
}

// packagePrefixes are the prefixes leasehold's packages put on their
// errors.
var packagePrefixes = map[string]bool{"leasehold": true, "lease": true, "idempotency": true, "compensation": true,
	"fence": true, "tracing": true, "redlock": true}

// destutter drops package-name segments ("leasehold", "lease", ...) from a
// ": "-separated error chain, and a segment repeating the one before.
func destutter(msg string) string {
	parts := strings.Split(msg, ": ")
	out := parts[:0]
	for _, p := range parts {
		if packagePrefixes[p] || (len(out) > 0 && out[len(out)-1] == p) {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return msg
	}
	return strings.Join(out, ": ")
}
