package cli

import (
	"context"
	"strings"
	"testing"
)

// TestRedisURLErrorsHidePassword: a password holding '#', '/', '?' or '@'
// unencoded ends the URL's userinfo early, and the parsers quote what they
// refuse, a piece of the password: no error quotes the URL, and a host is
// shown as parsed, host:port, or not at all.
func TestRedisURLErrorsHidePassword(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"redis://:S3cr#etPW@127.0.0.1:6379/0",
		"redis://:S3cr/etPW@127.0.0.1:6379/0",
		"redis://:S3cr?etPW@127.0.0.1:6379/0",
		"redis://u:6379/S3cr@127.0.0.1:6379/0",   // the userinfo makes a valid host; the path holds the rest
		"redis://u:6379#S3cr@127.0.0.1:6379/0",   // ... the fragment
		"redis://u:6379?S3cr=1@127.0.0.1:6379/0", // ... the query
		"redis+cluster://u:6379/S3cr@127.0.0.1:6379",
		"redis+sentinel://u:6379/S3cr@127.0.0.1:6379?master_name=m",
		"u:S3cr@127.0.0.1:6379",
	} {
		_, err := ParseRedisURL(raw)
		if err == nil {
			t.Errorf("%s: parsed", raw)
			continue
		}
		for _, secret := range []string{"S3cr", "etPW"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: error %q quotes the password", raw, err)
			}
		}
		if h := redisHosts(raw); strings.Contains(h, "S3cr") || strings.Contains(h, "6379") && !strings.HasPrefix(h, "127.0.0.1") {
			t.Errorf("%s: shown as host %q", raw, h)
		}
		r := run(context.Background(), t, map[string]string{"REDIS_URL": raw}, "fleet")
		if r.code != 2 || strings.Contains(r.stdout+r.stderr, "S3cr") || strings.Contains(r.stdout+r.stderr, "etPW") ||
			!strings.Contains(r.stderr, "percent-encode") {
			t.Errorf("REDIS_URL=%s worker fleet: exit %d, stderr %q", raw, r.code, r.stderr)
		}
	}
	for raw, want := range map[string]string{
		"redis://u:S3cretPW@127.0.0.1:6379/0": "127.0.0.1:6379",
		"rediss://u:S3cretPW@[::1]:6380":      "[::1]:6380",
		"redis://cache":                       "cache",
		"redis://u:pw@:6379/0":                "(unparsable URL)",
	} {
		if h := redisHosts(raw); h != want {
			t.Errorf("redisHosts(%s) = %q, want %q", raw, h, want)
		}
	}
}
