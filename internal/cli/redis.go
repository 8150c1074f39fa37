package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisURL is used when neither --redis nor REDIS_URL is given.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// ParseRedisURL builds a client from a URL in one of these forms:
//
//	redis://[user:password@]host:port[/db][?options]     one server
//	rediss://...                                          one server over TLS
//	redis+cluster://[user:password@]host:port?addr=host2:port&addr=...   Redis Cluster (rediss+cluster:// for TLS)
//	redis+sentinel://[user:password@]sentinel:port?master_name=NAME&addr=sentinel2:port   Sentinel (rediss+sentinel:// for TLS)
//
// The user and password are the ACL user; for Sentinel they are used for the
// sentinels and, unless the query sets others, for the master too. Options
// are go-redis's URL query options (dial_timeout, read_timeout, ...).
func ParseRedisURL(raw string) (redis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, redisURLError("redis URL", err)
	}
	if strayAt(u) {
		return nil, redisURLError("redis URL", errStrayAt)
	}
	scheme, mode, _ := strings.Cut(u.Scheme, "+")
	if scheme != "redis" && scheme != "rediss" {
		return nil, usagef("redis URL scheme %q: want redis, rediss, redis+cluster, redis+sentinel", u.Scheme)
	}
	u.Scheme = scheme
	plain := u.String()
	switch mode {
	case "":
		o, err := redis.ParseURL(plain)
		if err != nil {
			return nil, redisURLError("redis URL", err)
		}
		return redis.NewClient(o), nil
	case "cluster":
		o, err := redis.ParseClusterURL(plain)
		if err != nil {
			return nil, redisURLError("redis cluster URL", err)
		}
		return redis.NewClusterClient(o), nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(plain)
		if err != nil {
			return nil, redisURLError("redis sentinel URL", err)
		}
		if o.MasterName == "" {
			return nil, usagef("redis sentinel URL needs ?master_name=NAME")
		}
		if o.Username == "" && o.Password == "" {
			o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
		}
		return redis.NewFailoverClient(o), nil
	}
	return nil, usagef("redis URL scheme %q: unknown mode %q", u.Scheme, mode)
}

// errStrayAt is an '@' after the host: one the password held, unencoded,
// and the URL's userinfo ended before it.
var errStrayAt = errors.New("stray @")

// strayAt reports an '@' past the userinfo: a password holding '/', '?' or
// '#' unencoded ends the URL's authority early, and the rest of the
// password, with its '@', lands in the path, query or fragment.
func strayAt(u *url.URL) bool {
	return strings.Contains(u.Host, "@") || strings.Contains(u.Path, "@") || strings.Contains(u.RawQuery, "@") ||
		strings.Contains(u.Fragment, "@") || strings.Contains(u.Opaque, "@")
}

// redisURLError says what is wrong with a Redis URL without quoting any of
// it: url.Parse and go-redis quote the part they refuse (a host, a path, an
// option), and with a password holding '/', '?' or '#' unencoded that part
// is a piece of the password.
func redisURLError(kind string, err error) error {
	what := "cannot parse it"
	msg := err.Error()
	switch {
	case errors.Is(err, errStrayAt):
		what = "an '@' after the host"
	case strings.Contains(msg, "invalid port"):
		what = "the port is not a number"
	case strings.Contains(msg, "invalid database number"), strings.Contains(msg, "invalid URL path"):
		what = "the path is not a database number"
	case strings.Contains(msg, "unexpected option"):
		what = "an unknown option in the query"
	case strings.Contains(msg, "unable to parse addr"):
		what = "an addr option is not host:port"
	case strings.Contains(msg, " number: "), strings.Contains(msg, " duration: "), strings.Contains(msg, " boolean: "):
		what = "an option in the query has a bad value"
	}
	return usagef("%s: %s (the URL is not shown: it may hold a password; percent-encode the password's special characters, such as / ? # @ %%)", kind, what)
}

// openRedis parses the URL and checks that the server answers within 3s.
func openRedis(ctx context.Context, raw string) (redis.UniversalClient, error) {
	c, err := ParseRedisURL(raw)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", redisHosts(raw), err)
	}
	return c, nil
}

// redisHosts returns the host and port of a Redis URL, parsed, without
// credentials; "(unparsable URL)" when that is in doubt (see strayAt).
func redisHosts(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || strayAt(u) || u.Hostname() == "" {
		return "(unparsable URL)"
	}
	if u.Port() == "" {
		return u.Hostname()
	}
	return net.JoinHostPort(u.Hostname(), u.Port())
}
