package cli

import (
	"context"
	"strings"
	"testing"
)

// TestHelpMasksSecrets: `-h` shows each flag's default, which its
// environment variable sets; the passwords that REDIS_URL and PG_URL may
// hold are masked there, for every command, also when a password holds
// characters that end a URL's userinfo early.
func TestHelpMasksSecrets(t *testing.T) {
	t.Parallel()
	a := newApp(DemoOptions(testDevParts)...)
	withRedis := map[string]bool{}
	describeCommands(a, func(name string, f *flags) {
		if f.Lookup("redis") != nil {
			withRedis[name] = true
		}
	})
	if len(withRedis) < 10 {
		t.Fatalf("only %d commands define --redis: the commands were not described", len(withRedis))
	}
	for _, tc := range []struct{ redisURL, want string }{
		{"redis://u:S3cretPW@127.0.0.1:6379/0", `(default "redis://u:xxxxx@127.0.0.1:6379/0")`},
		{"redis://:S3cr#etPW@127.0.0.1:6379/0", `(default "redis://:xxxxx@127.0.0.1:6379/0")`},
		{"redis://u:S3cr/et@PW@127.0.0.1:6379/0", `(default "redis://u:xxxxx@127.0.0.1:6379/0")`},
		{"redis+sentinel://s:6379?master_name=m&sentinel_password=S3cretPW", `sentinel_password=xxxxx")`},
	} {
		env := map[string]string{"REDIS_URL": tc.redisURL, "PG_URL": "postgres://app:S3cretPW@db/app?sslmode=disable"}
		for _, name := range a.names() {
			r := run(context.Background(), t, env, name, "-h")
			for _, secret := range []string{"S3cretPW", "S3cr", "etPW", "et@PW"} {
				if strings.Contains(r.stdout+r.stderr, secret) {
					t.Errorf("REDIS_URL=%s: %s -h shows %q:\n%s%s", tc.redisURL, name, secret, r.stdout, r.stderr)
				}
			}
			if withRedis[name] && !strings.Contains(r.stdout, tc.want) {
				t.Errorf("REDIS_URL=%s: %s -h lacks %s:\n%s", tc.redisURL, name, tc.want, r.stdout)
			}
		}
	}
	if r := run(context.Background(), t, map[string]string{"PG_URL": "host=db password='S3cret PW' user=app"}, "run", "-h"); strings.Contains(r.stdout, "S3cret") ||
		!strings.Contains(r.stdout, "password=xxxxx user=app") {
		t.Errorf("run -h with a PG_URL keyword string:\n%s", r.stdout)
	}
}
