package idempotency

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// readPolicy reads the maxmemory-policy of one server: CONFIG GET first and,
// when the server refuses it (an ACL user without CONFIG, or CONFIG disabled
// or renamed, as on managed services), the maxmemory_policy field of INFO
// memory. It fails with ErrPolicyUnknown when both are refused; errors that
// mean the server cannot be reached are classified as usual.
func readPolicy(ctx context.Context, c *redis.Client) (string, error) {
	res, cerr := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if cerr == nil {
		if p, ok := res["maxmemory-policy"]; ok {
			return p, nil
		}
	} else if !refused(cerr) {
		return "", fmt.Errorf("idempotency: CONFIG GET maxmemory-policy: %w", classify(cerr))
	}
	p, ierr := infoPolicy(ctx, c)
	switch {
	case ierr == nil:
		return p, nil
	case !refused(ierr):
		return "", fmt.Errorf("idempotency: INFO memory: %w", classify(ierr))
	}
	if cerr == nil {
		cerr = errors.New("CONFIG GET returned nothing")
	}
	return "", fmt.Errorf("%w on %s: CONFIG GET (%w) and INFO (%w) both refused: grant the Redis user +info, "+
		"or state the policy with WithMaxmemoryPolicy", ErrPolicyUnknown, c.Options().Addr, cerr, ierr)
}

// refused reports whether err is the server's refusal of a command (NOPERM,
// an unknown or renamed command), as opposed to an outage.
func refused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.ErrClosed) && !errors.Is(classify(err), ErrUnavailable)
}

// infoPolicy reads maxmemory_policy from INFO memory.
func infoPolicy(ctx context.Context, c *redis.Client) (string, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return "", err
	}
	if p, ok := parseInfoPolicy(info); ok {
		return p, nil
	}
	return "", errors.New("INFO memory has no maxmemory_policy field")
}

// parseInfoPolicy finds the maxmemory_policy field in an INFO reply.
func parseInfoPolicy(info string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "maxmemory_policy:"); ok && v != "" {
			return v, true
		}
	}
	return "", false
}
