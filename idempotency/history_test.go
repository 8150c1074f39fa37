package idempotency

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/leasing"
)

// TestHistoryOrderTakeoverBound: the history keeps attempts oldest first; a
// takeover ends the previous attempt as taken over unless it ended, the
// owner's own late account replaces it (TakenOver stays), compensation
// steps join their attempt, and only the last WithHistory attempts stay.
func TestHistoryOrderTakeoverBound(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithHistory(3)})
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.s.HistoryStart(ctx, "h", Attempt{Attempt: 1, Fence: 10, Owner: "aa", Worker: "w1", TraceID: "t1", SpanID: "s1"}, 0))
	must(e.s.HistoryStart(ctx, "h", Attempt{Attempt: 2, Fence: 20, Owner: "bb", Worker: "w2"}, 10))
	must(e.s.HistoryCompensation(ctx, "h", 10, CompensationStep{Step: "charge", Handler: "refund", Outcome: "compensated"}))
	must(e.s.HistoryEnd(ctx, "h", 10, EndLeaseLost))
	must(e.s.HistoryEnd(ctx, "h", 20, EndCompleted))
	hs, err := e.s.History(ctx, "h")
	must(err)
	if len(hs) != 2 {
		t.Fatalf("history = %+v", hs)
	}
	a, b := hs[0], hs[1]
	if a.Fence != 10 || a.Attempt != 1 || a.End != EndLeaseLost || !a.TakenOver || a.TraceID != "t1" || a.SpanID != "s1" ||
		a.Worker != "w1" || a.Started.IsZero() || a.Ended.IsZero() || len(a.Compensations) != 1 || a.Compensations[0].Outcome != "compensated" {
		t.Fatalf("first attempt = %+v", a)
	}
	if b.Fence != 20 || b.End != EndCompleted || b.TakenOver || b.Ended.Before(b.Started) {
		t.Fatalf("second attempt = %+v", b)
	}
	for f := uint64(30); f <= 50; f += 10 {
		must(e.s.HistoryStart(ctx, "h", Attempt{Fence: f}, 0))
	}
	hs, err = e.s.History(ctx, "h")
	must(err)
	if len(hs) != 3 || hs[0].Fence != 30 || hs[2].Fence != 50 {
		t.Fatalf("bounded history = %+v, want fences 30, 40, 50", hs)
	}
	ttl := e.c.PTTL(ctx, e.s.historyKey(e.s.Tag("h"), "h")).Val()
	if ttl <= 0 || ttl > e.s.Retention()*2 {
		t.Fatalf("history TTL %s, want the retention's", ttl)
	}
}

// TestHistoryMemory measures the Redis memory of one key's history (MEMORY
// USAGE, SAMPLES 0) with 1 and with 16 attempts, each started and ended with
// a realistic owner digest, worker identity, trace and span IDs, with and
// without one compensation step each, and without and with a job type of 17
// bytes (entries written before the type was kept, and now). It prints
// name=value lines (run with -v); it asserts only the bound (16 attempts
// kept of 20 written).
func TestHistoryMemory(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for _, typ := range []string{"", "payments.transfer"} {
		for _, comp := range []bool{false, true} {
			historyMemory(t, e, typ, comp)
		}
	}
}

func historyMemory(t *testing.T, e *env, typ string, comp bool) {
	t.Helper()
	ctx := t.Context()
	suffix := ""
	if typ != "" {
		suffix = "_type"
	}
	for _, n := range []int{1, 16, 20} {
		k := "mem-" + strconv.Itoa(n) + "-" + strconv.FormatBool(comp) + suffix
		for i := 1; i <= n; i++ {
			f := uint64(1795636475671090 + i)
			a := Attempt{Attempt: i, Fence: f, Owner: "3f9a1c0e", Worker: "worker-7f9c8d6b5-x2k4q/12345",
				TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Type: typ}
			if err := e.s.HistoryStart(ctx, k, a, 0); err != nil {
				t.Fatal(err)
			}
			if comp {
				if err := e.s.HistoryCompensation(ctx, k, f, CompensationStep{Step: "hold", Handler: "payments.release", Outcome: "compensated"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.s.HistoryEnd(ctx, k, f, EndLeaseLost); err != nil {
				t.Fatal(err)
			}
		}
		hk := e.s.historyKey(e.s.Tag(k), k)
		b, err := e.c.MemoryUsage(ctx, hk, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		kept := e.c.LLen(ctx, hk).Val()
		if want := int64(min(n, DefaultHistory)); kept != want {
			t.Fatalf("%d attempts written, %d kept; want %d", n, kept, want)
		}
		t.Logf("history_bytes_attempts_%d_compensation_%v%s=%d bytes", n, comp, suffix, b)
	}
}

// TestStartEntry: the entry the store sends the claim script reads back as
// sent whatever the worker, trace, span and type hold (quotes,
// backslashes, control characters, non-ASCII text, IDs that are not hex),
// cut to their bounds, open and ended; OpenTelemetry's hex IDs are kept as
// raw bytes.
func TestStartEntry(t *testing.T) {
	t.Parallel()
	s := &Store{cfg: cfg{history: DefaultHistory}}
	long := strings.Repeat("w", maxHistoryField+10)
	// A record carries the entry of a first claim, whose fence is the
	// claim's Redis time in microseconds: the entry's start.
	const fence = 1795786223194123
	start, end := time.UnixMilli(fence/1000), time.UnixMilli(1795786224000)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(end.UnixMilli()))
	for _, r := range []Request{
		{},
		{Worker: "host-a/12345", TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Type: "payments.transfer"},
		{Worker: `w"x":"failed"\`, TraceID: "0AF7651916CD43DD8448EB211C80319C", SpanID: "b7ad6b71", Type: "a\x00b\nc\x1f\u2028日本"},
		{Worker: long, TraceID: long, SpanID: long, Type: long},
	} {
		open := []byte(s.startEntry("token", &r))
		want := Attempt{Fence: fence, Attempt: 2, Owner: leasing.OwnerDigest("token"), Worker: historyCut(r.Worker, maxHistoryField),
			TraceID: historyCut(r.TraceID, maxHistoryField), SpanID: historyCut(r.SpanID, maxHistoryField), Type: historyType(r.Type),
			Started: start}
		a, ok := decodeEntry(open, fence, 2)
		if !ok || !cmp.Equal(a, want) {
			t.Fatalf("entry %q reads %+v (%v), want %+v", open, a, ok, want)
		}
		ended := append(append(append([]byte{}, open...), ms[2:]...), "completed"...)
		want.Ended, want.End = end, EndCompleted
		if a, ok := decodeEntry(ended, fence, 2); !ok || !cmp.Equal(a, want) {
			t.Fatalf("entry %q reads %+v (%v), want %+v", ended, a, ok, want)
		}
		if r.SpanID == "b7ad6b7169203331" && len(open) != 1+8+1+(1+len(r.Worker))+(1+16)+(1+8)+(1+len(r.Type)) {
			t.Fatalf("hex IDs not kept raw: %d bytes", len(open))
		}
		for n := range len(open) {
			if _, ok := decodeEntry(open[:n], fence, 2); ok {
				t.Fatalf("entry cut to %d of %d bytes reads as whole", n, len(open))
			}
		}
	}
	// A record written before the binary form carries the JSON text.
	old := `{"f":"7","a":2,"s":1795786223194,"o":"abcd0123","w":"host/1","e":1795786223194,"x":"completed"}`
	if a, ok := decodeEntry([]byte(old), 7, 2); !ok || a.Worker != "host/1" || a.End != EndCompleted || !a.Started.Equal(start) {
		t.Fatalf("JSON entry reads %+v (%v)", a, ok)
	}
	if _, ok := decodeEntry([]byte(old), 8, 2); ok {
		t.Fatal("a JSON entry of another fence is read as the record's")
	}
	if e := (&Store{}).startEntry("token", &Request{Worker: "w"}); e != "" {
		t.Fatalf("without a history: %q", e)
	}
}
