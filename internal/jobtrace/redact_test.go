package jobtrace_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/outcome"
)

func TestKeyRedaction(t *testing.T) {
	const key = "alice@example.com"
	sum := sha256.Sum256([]byte(key))
	hashed := "sha256:" + hex.EncodeToString(sum[:8])
	for _, tc := range []struct {
		name    string
		opts    []jobtrace.Opt
		want    string // "" = attribute absent
		leakRaw bool
	}{
		{"hash", nil, hashed, false},
		{"hmac", []jobtrace.Opt{jobtrace.WithKeyHashSecret([]byte("pepper"))}, "hmac-sha256:", false},
		{"full", []jobtrace.Opt{jobtrace.WithKeyRedaction(jobtrace.KeyFull)}, key, true},
		{"none", []jobtrace.Opt{jobtrace.WithKeyRedaction(jobtrace.KeyOmitted)}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, tc.opts...)
			r := &kgo.Record{Topic: "jobs", Key: []byte(key), Value: []byte("payload")}
			ctx, job := f.tr.StartJob(context.Background(), r, "mail", key)
			_, h := job.StartHandler(ctx)
			err := fmt.Errorf("send to %s: %w", key, errors.New("mailbox full"))
			h.End(jobtrace.OutcomeFailed, err)
			job.LeaseLost(fmt.Errorf("lease %q: gone", key))
			job.End(outcome.Failed, err)

			spans := f.spans.GetSpans()
			ja := attrs(tree(spans).one(t, "process jobs").Attributes)
			for _, k := range []string{jobtrace.AttrIdempotencyKey, "messaging.kafka.message.key"} {
				got, ok := ja[k]
				switch {
				case tc.want == "" && ok:
					t.Errorf("%s = %q, want it omitted", k, got)
				case tc.want != "" && !strings.HasPrefix(got, tc.want):
					t.Errorf("%s = %q, want %q", k, got, tc.want)
				}
			}
			if !tc.leakRaw {
				assertNoValue(t, spans, key)
			}
			if hs := tree(spans).one(t, "handler"); !strings.Contains(hs.Status.Description, "mailbox full") {
				t.Errorf("handler status %q lost the error's message", hs.Status.Description)
			}
			assertNoValue(t, spans, "payload")
		})
	}
}

// Equal keys hash equally, so one job's attempts can be found; different
// secrets give different hashes.
func TestKeyHashStable(t *testing.T) {
	get := func(opts ...jobtrace.Opt) string {
		f := setup(t, opts...)
		_, job := f.tr.StartJob(context.Background(), &kgo.Record{Topic: "jobs"}, "t", "order-7")
		job.End(outcome.Completed, nil)
		return attrs(f.spans.GetSpans()[0].Attributes)[jobtrace.AttrIdempotencyKey]
	}
	a, b := get(), get()
	s1, s2 := get(jobtrace.WithKeyHashSecret([]byte("one"))), get(jobtrace.WithKeyHashSecret([]byte("two")))
	if a != b || a == "" {
		t.Errorf("hashes of one key differ: %q %q", a, b)
	}
	if s1 == s2 || s1 == a {
		t.Errorf("secrets do not change the hash: %q %q %q", a, s1, s2)
	}
}

func TestParseRedaction(t *testing.T) {
	for in, want := range map[string]jobtrace.Redaction{
		"hash": jobtrace.KeyHashed, "FULL": jobtrace.KeyFull, "none": jobtrace.KeyOmitted, " omit ": jobtrace.KeyOmitted,
	} {
		got, err := jobtrace.ParseRedaction(in)
		if err != nil || got != want {
			t.Errorf("ParseRedaction(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, _ := jobtrace.ParseRedaction(got.String()); back != got {
			t.Errorf("%v does not round-trip through String", got)
		}
	}
	if _, err := jobtrace.ParseRedaction("partial"); !errors.Is(err, jobtrace.ErrConfig) {
		t.Errorf("ParseRedaction(partial) error %v, want ErrConfig", err)
	}
	if _, err := jobtrace.New(jobtrace.WithKeyRedaction(jobtrace.Redaction(9))); !errors.Is(err, jobtrace.ErrConfig) {
		t.Errorf("New with an unknown redaction: %v, want ErrConfig", err)
	}
}

// Long job types and keys are bounded; invalid UTF-8 is replaced.
func TestBoundedAttributes(t *testing.T) {
	f := setup(t, jobtrace.WithKeyRedaction(jobtrace.KeyFull))
	long := strings.Repeat("é", 1000)
	_, job := f.tr.StartJob(context.Background(), &kgo.Record{Topic: "jobs"}, long, long+"\xff")
	job.End(outcome.Name(strings.Repeat("x", 500)), errors.New(strings.Repeat("e", 5000)))
	s := f.spans.GetSpans()[0]
	a := attrs(s.Attributes)
	if n := len(a[jobtrace.AttrJobType]); n > 64 {
		t.Errorf("job type attribute is %d bytes", n)
	}
	if n := len(a[jobtrace.AttrIdempotencyKey]); n > 256 || n == 0 {
		t.Errorf("key attribute is %d bytes", n)
	}
	if n := len(s.Name); n > 68 {
		t.Errorf("span name is %d bytes", n)
	}
	if n := len(s.Status.Description); n > 256 {
		t.Errorf("status description is %d bytes", n)
	}
	if n := len(a[jobtrace.AttrOutcome]); n > 64 {
		t.Errorf("outcome is %d bytes", n)
	}
}
