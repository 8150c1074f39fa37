package chaos

import (
	"errors"
	"flag"
	"testing"
	"time"
)

func TestConfigFromEnvAndFlags(t *testing.T) {
	t.Setenv("CHAOS_SEED", "42")
	t.Setenv("CHAOS_JOBS", "1000")
	t.Setenv("CHAOS_WORKERS", "4")
	t.Setenv("CHAOS_KILL_EVERY", "3s")
	t.Setenv("CHAOS_PAUSE", "")
	var c Config
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	c.Flags(fs)
	if err := fs.Parse([]string{"-workers", "5", "-lease-ttl", "1s"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.Seed != 42 || c.Jobs != 1000 || c.Workers != 5 || c.KillEvery != 3*time.Second {
		t.Fatalf("config = %+v", c)
	}
	if c.Pause != 3*time.Second {
		t.Fatalf("default pause %s, want 2*TTL+1s = 3s", c.Pause)
	}
	if h := c.Horizon(); h != 12*time.Second {
		t.Fatalf("horizon %s, want max(1000 jobs / 200 per s, 4 kill intervals, 2 pauses) = 12s", h)
	}
}

func TestConfigRejects(t *testing.T) {
	t.Setenv("CHAOS_JOBS", "many")
	var c Config
	c.Flags(flag.NewFlagSet("chaos", flag.ContinueOnError))
	if err := c.Finish(); !errors.Is(err, ErrConfig) {
		t.Fatalf("CHAOS_JOBS=many: %v, want ErrConfig", err)
	}
	for name, c := range map[string]Config{
		"pause not longer than TTL": {LeaseTTL: 2 * time.Second, Pause: 2 * time.Second},
		"one worker":                {Workers: 1},
		"duplicates above 1":        {Duplicates: 1.5},
	} {
		if err := c.Finish(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
