package cli

import (
	"context"
	"errors"
	"fmt"
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
		return nil, usagef("redis URL: %v", redactURLError(err))
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
			return nil, usagef("redis URL: %v", redactURLError(err))
		}
		return redis.NewClient(o), nil
	case "cluster":
		o, err := redis.ParseClusterURL(plain)
		if err != nil {
			return nil, usagef("redis cluster URL: %v", redactURLError(err))
		}
		return redis.NewClusterClient(o), nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(plain)
		if err != nil {
			return nil, usagef("redis sentinel URL: %v", redactURLError(err))
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

// redactURLError drops the URL (which may hold a password) from url errors.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
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

// redisHosts returns the host part of a Redis URL without credentials.
func redisHosts(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Host
}
