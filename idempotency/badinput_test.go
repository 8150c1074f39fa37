package idempotency

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"testing"
)

// snapshot returns every key under the env's prefix with its DUMP and
// PTTL, so that a test can check that a refused call wrote nothing.
func (e *env) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range e.keys(t) {
		d, err := e.c.Dump(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = d
	}
	return out
}

// TestBadInputKeyPrefixOfAnother: keys that are prefixes of one another, or
// differ only in a suffix, are distinct records.
func TestBadInputKeyPrefixOfAnother(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "order-1", fp("a"), Acquired)
	if err := e.s.Complete(ctx, c, []byte("one")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"order-10", "order-", "order-1.", "order-1:x", "order-1}", "{order-1}", "Order-1"} {
		c := e.claim(t, k, fp("a"), Acquired)
		if err := e.s.Complete(ctx, c, []byte(k)); err != nil {
			t.Fatalf("Complete(%q): %v", k, err)
		}
	}
	d := e.claim(t, "order-1", fp("a"), Duplicate)
	if string(d.Record.Result) != "one" {
		t.Fatalf("order-1 replays %q, want %q", d.Record.Result, "one")
	}
}

// TestBadInputMetacharacterKeys: Redis glob, Lua and hash-tag characters in
// keys reach Redis only as KEYS/ARGV data: each key gets its own record,
// replays its own result, and every Redis key written stays under the prefix.
func TestBadInputMetacharacterKeys(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	keys := []string{
		"*", "?", "[a-z]", "{x}", "}{", "{}", "{{}}", `\`, `"`, "'", "%s%n", "lh:idem:b:*",
		"'..redis.call('FLUSHALL')..'", "]];redis.call('DEL',KEYS[1])--[[", "KEYS[1]", "ARGV[1]",
		"日本語のキー", "a+b", "\u200b", strings.Repeat("{", 100),
	}
	for _, k := range keys {
		c := e.claim(t, k, fp(k), Acquired)
		if err := e.s.Complete(ctx, c, []byte("result:"+k)); err != nil {
			t.Fatalf("Complete(%q): %v", k, err)
		}
	}
	for _, k := range keys {
		d := e.claim(t, k, fp(k), Duplicate)
		if got := string(d.Record.Result); got != "result:"+k {
			t.Errorf("key %q replays %q", k, got)
		}
	}
	for _, k := range e.keys(t) {
		if !strings.HasPrefix(k, e.prefix) {
			t.Errorf("key %q written outside the prefix %q", k, e.prefix)
		}
	}
}

// TestBadInputCorruptRecord: a record corrupted by hand in Redis is reported
// as ErrCorrupt by Claim for each kind of damage (a value shorter than the
// 18-byte header included: the claim script refuses it before unpacking),
// and the claim writes nothing (no lease, no new record).
func TestBadInputCorruptRecord(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "victim", fp("a"), Acquired)
	if err := e.s.Complete(ctx, c, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	h := hashKey("victim")
	var bucket string
	for _, k := range e.keys(t) {
		if ok, err := e.c.HExists(ctx, k, h.field()).Result(); err == nil && ok {
			bucket = k
		}
	}
	if bucket == "" {
		t.Fatal("no bucket holds the record")
	}
	good, err := e.c.HGet(ctx, bucket, h.field()).Result()
	if err != nil {
		t.Fatal(err)
	}
	fenceTooBig := []byte(good)
	copy(fenceTooBig[1:8], bytes.Repeat([]byte{0xff}, 7))
	damages := map[string][]byte{
		"empty":             {},
		"truncated header":  []byte(good[:5]),
		"one byte short":    []byte(good[:headerLen-1]),
		"unknown state":     append([]byte{0x0e}, good[1:]...),
		"state zero":        append([]byte{0x00}, good[1:]...),
		"unknown flags":     append([]byte{good[0] | 0x40}, good[1:]...),
		"fence above 2^53":  fenceTooBig,
		"external, missing": append([]byte{good[0] | flagExternal}, good[1:outcomeLen]...),
	}
	names := make([]string, 0, len(damages))
	for n := range damages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := e.c.HSet(ctx, bucket, h.field(), damages[name]).Err(); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot(t)
		c, err := e.s.Claim(ctx, "victim", fp("a"))
		switch {
		case c.Lease != nil || c.Outcome != 0:
			t.Errorf("%s: Claim = outcome %v, err %v; want an error and no lease", name, c.Outcome, err)
		case !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnavailable):
			t.Errorf("%s: Claim err %v; want ErrCorrupt", name, err)
		}
		if c.Lease != nil {
			_ = e.s.Fail(ctx, c, Retryable, errors.New("cleanup"))
		}
		after := e.snapshot(t)
		for k, v := range after {
			// A claim announces the Store's layout when its last
			// announcement is over a second old (layout.go), which a
			// loaded machine reaches between two of these claims: that is
			// bookkeeping, not the record.
			if before[k] != v && k != e.s.layoutsKey() {
				t.Errorf("%s: Claim changed %s", name, k)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("%s: Claim deleted %s", name, k)
			}
		}
	}
}
