package chaos

import (
	"errors"
	"flag"
	"strings"
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
	// The workers' own defaults for a 1s lease TTL: Kafka's 6s floor, and a
	// third of it; the workers get no flag for them.
	if c.SlowFraction != 0.05 || c.Hold != time.Second || c.SessionTimeout != 6*time.Second ||
		c.HeartbeatInterval != 2*time.Second || c.FetchMaxWait != 250*time.Millisecond {
		t.Fatalf("defaults: slow %v, hold %s (want the lease TTL), session %s, heartbeat %s, fetch wait %s",
			c.SlowFraction, c.Hold, c.SessionTimeout, c.HeartbeatInterval, c.FetchMaxWait)
	}
	if args := c.workerGroupArgs(); len(args) != 0 {
		t.Fatalf("worker group flags %q, want none (the workers derive them)", args)
	}
}

func TestConfigHoldAndGroupFromEnv(t *testing.T) {
	t.Setenv("CHAOS_SLOW_FRACTION", "0.5")
	t.Setenv("CHAOS_HOLD", "700ms")
	t.Setenv("CHAOS_SESSION_TIMEOUT", "2s")
	t.Setenv("CHAOS_HEARTBEAT_INTERVAL", "500ms")
	t.Setenv("CHAOS_FETCH_MAX_WAIT", "100ms")
	var c Config
	c.Flags(flag.NewFlagSet("chaos", flag.ContinueOnError))
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.SlowFraction != 0.5 || c.Hold != 700*time.Millisecond || c.SessionTimeout != 2*time.Second ||
		c.HeartbeatInterval != 500*time.Millisecond || c.FetchMaxWait != 100*time.Millisecond {
		t.Fatalf("config = %+v", c)
	}
	if got, want := strings.Join(c.workerGroupArgs(), " "), "--session-timeout 2s --heartbeat-interval 500ms"; got != want {
		t.Fatalf("worker group flags %q, want %q", got, want)
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
		"pause not longer than TTL":            {LeaseTTL: 2 * time.Second, Pause: 2 * time.Second},
		"one worker":                           {Workers: 1},
		"duplicates above 1":                   {Duplicates: 1.5},
		"negative slow fraction":               {SlowFraction: -0.1},
		"slow fraction above 1":                {SlowFraction: 2},
		"negative hold":                        {Hold: -time.Second},
		"hold above a minute":                  {Hold: 61 * time.Second},
		"session timeout too short":            {SessionTimeout: 50 * time.Millisecond},
		"heartbeat not below session":          {SessionTimeout: time.Second, HeartbeatInterval: time.Second},
		"negative heartbeat":                   {HeartbeatInterval: -time.Second},
		"negative fetch wait":                  {FetchMaxWait: -time.Millisecond},
		"unknown kafka":                        {Kafka: "redpanda"},
		"broker pause not longer than session": {SessionTimeout: 2 * time.Second, BrokerPause: 2 * time.Second},
		"broker faults too often":              {BrokerFaultEvery: 100 * time.Millisecond},
		"partitions too often":                 {PartitionEvery: 100 * time.Millisecond},
		"partition not longer than TTL":        {LeaseTTL: 2 * time.Second, PartitionFor: 2 * time.Second},
		"soak shorter than its warm-up":        {Retention: time.Minute, Soak: 2 * time.Minute},
		"negative soak":                        {Soak: -time.Minute},
	} {
		if err := c.Finish(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

func TestConfigSoakAndPartitions(t *testing.T) {
	t.Setenv("SOAK_DURATION", "10m")
	t.Setenv("CHAOS_RATE", "50")
	t.Setenv("CHAOS_RETENTION", "2m")
	var c Config
	c.Flags(flag.NewFlagSet("chaos", flag.ContinueOnError))
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.Jobs != 30000 || c.Horizon() != 10*time.Minute || c.SoakSample != 10*time.Second {
		t.Fatalf("soak of 10m at 50 jobs/s: jobs %d (want 30000), horizon %s (want 10m), sample %s (want 10s)",
			c.Jobs, c.Horizon(), c.SoakSample)
	}
	if w := c.SoakWarmup(); w != 3*time.Minute+30*time.Second {
		t.Fatalf("warm-up %s, want retention + half of it + 30s = 3m30s", w)
	}
	if c.PartitionEvery != 10*time.Second || c.PartitionFor != 11*time.Second {
		t.Fatalf("partition defaults: every %s (want 10s), for %s (want 2*2s+6s+1s, the derived session)", c.PartitionEvery, c.PartitionFor)
	}
}

func TestConfigKafka(t *testing.T) {
	t.Setenv("CHAOS_KAFKA", "")
	var def Config
	def.Flags(flag.NewFlagSet("chaos", flag.ContinueOnError))
	if err := def.Finish(); err != nil {
		t.Fatal(err)
	}
	if def.Kafka != KafkaFake || def.BrokerFaultEvery != 30*time.Second || def.BrokerPause != 13*time.Second {
		t.Fatalf("defaults: kafka %q (want kfake), broker fault every %s (want 30s), broker pause %s (want 2*6s+1s, the derived session)",
			def.Kafka, def.BrokerFaultEvery, def.BrokerPause)
	}

	t.Setenv("CHAOS_KAFKA", "apache")
	t.Setenv("CHAOS_BROKER_FAULT_EVERY", "12s")
	t.Setenv("CHAOS_BROKER_PAUSE", "7s") // longer than the derived 6s session
	var c Config
	c.Flags(flag.NewFlagSet("chaos", flag.ContinueOnError))
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.Kafka != KafkaApache || c.BrokerFaultEvery != 12*time.Second || c.BrokerPause != 7*time.Second {
		t.Fatalf("config = %+v", c)
	}

	t.Setenv("CHAOS_KAFKA", "Apache Kafka")
	var bad Config
	bad.Flags(flag.NewFlagSet("chaos", flag.ContinueOnError))
	err := bad.Finish()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"Apache Kafka"`) ||
		!strings.Contains(err.Error(), "want kfake") {
		t.Fatalf("CHAOS_KAFKA=%q: %v, want ErrConfig naming the value and the choices", "Apache Kafka", err)
	}
}
