package cli

import (
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/leasehold/leasehold"
)

// FuzzParseRedisURL feeds arbitrary Redis URLs, with a password in their
// user info, to ParseRedisURL. It must never panic, a refusal is a usage
// error, and no error message may contain the password, however the URL is
// broken around it.
func FuzzParseRedisURL(f *testing.F) {
	for _, s := range [][3]string{
		{"redis", "127.0.0.1:6379/0", "s3cret-pass"},
		{"rediss", "host:6380/1?dial_timeout=1s", "s3cret-pass"},
		{"redis+cluster", "h1:7000?addr=h2:7001", "s3cret-pass"},
		{"redis+sentinel", "s1:26379?master_name=m&addr=s2:26379", "s3cret-pass"},
		{"redis+sentinel", "s1:26379", "s3cret-pass"},
		{"redis", "127.0.0.1:6379/notanumber", "s3cret-pass"},
		{"redis", "[::1", "s3cret-pass"},
		{"redis", "host:port", "s3cret-pass"},
		{"http", "host", "s3cret-pass"},
		{"redis+unknown", "host", "s3cret-pass"},
		{"redis", "host:6379/0?dial_timeout=forever", "s3cret-pass"},
		{"redis", "host%zz", "pw%zz-secret"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, scheme, rest, password string) {
		if len(password) < 6 {
			return
		}
		raw := scheme + "://user:" + url.PathEscape(password) + "@" + rest
		c, err := ParseRedisURL(raw)
		if err == nil {
			_ = c.Close()
			return
		}
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Fatalf("ParseRedisURL(%q) = %v, want a usage error", raw, err)
		}
		for _, secret := range []string{password, url.PathEscape(password), url.QueryEscape(password)} {
			if strings.Contains(err.Error(), secret) && !strings.Contains(scheme+rest, secret) {
				t.Fatalf("error for %q reveals the password: %v", raw, err)
			}
		}
	})
}

// FuzzKeyArg feeds arbitrary key arguments (`worker inspect KEY`, `expire
// KEY`) to keyArg: it accepts exactly the keys leasehold.ValidateKey
// accepts, and its one-line error never echoes control characters to the
// terminal.
func FuzzKeyArg(f *testing.F) {
	for _, s := range []string{
		"order-1", "", "a b", "\x1b[2J", "k\x00", "caf\xc3", "{i:7}:order", "*", "' .. redis.call('FLUSHALL') .. '",
		strings.Repeat("k", leasehold.MaxKeyLen+1), "\u2028", "--", "-h",
	} {
		f.Add(s)
	}
	e := &Env{Stdout: io.Discard, Stderr: io.Discard}
	f.Fuzz(func(t *testing.T, k string) {
		fl := newFlags(e, "inspect", "KEY")
		if err := fl.Parse(append([]string{"--"}, k)); err != nil {
			t.Fatalf("parse: %v", err)
		}
		got, err := keyArg(fl)
		if want := leasehold.ValidateKey(k); (err == nil) != (want == nil) {
			t.Fatalf("keyArg(%q) = %v, ValidateKey = %v", k, err, want)
		}
		if err != nil {
			msg := oneLine(err)
			if strings.IndexFunc(msg, unicode.IsControl) >= 0 {
				t.Fatalf("error for %q carries control characters: %q", k, msg)
			}
			return
		}
		if got != k {
			t.Fatalf("keyArg returned %q for %q", got, k)
		}
	})
}
