package idempotency

import (
	"math"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

func TestCapacity(t *testing.T) {
	t.Parallel()
	// A server of its own: other tests writing to the shared one would
	// distort the used_memory delta.
	srv := testkit.StartRedis(t)
	// 65536 shards: buckets at 100/s stay listpacks (at DefaultShards they
	// would not).
	e := setupOn(t, srv.Client(t), "cap:", []Opt{WithHistory(0), WithShards(65536)})
	r, err := e.s.Capacity(t.Context(), 1000, 24*time.Hour)
	if err != nil {
		t.Fatalf("Capacity: %v", err)
	}
	// 1000/s over 12h windows in 65536 shards: about 660 records a bucket,
	// above the default hash-max-listpack-entries (512).
	if math.Abs(r.RecordsPerBucket-1000*43200.0/65536) > 1 || r.Listpack || r.MinShards != 84375 {
		t.Fatalf("layout figures %+v", r)
	}
	if r.BytesPerRecord < 30 || r.BytesPerRecord > 200 {
		t.Fatalf("measured %.1f bytes per record, outside any plausible range", r.BytesPerRecord)
	}
	if want := 1000 * (24 + 12) * 3600.0; r.PeakRecords != want || r.PeakBytes != want*r.BytesPerRecord {
		t.Fatalf("peak %v records %v bytes", r.PeakRecords, r.PeakBytes)
	}
	if n, _ := srv.Client(t).DBSize(t.Context()).Result(); n != 0 {
		t.Fatalf("%d scratch keys left", n)
	}
	t.Logf("1000/s: %+v", r)
	// At a rate whose buckets stay listpacks, a record costs less.
	small, err := e.s.Capacity(t.Context(), 100, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !small.Listpack || small.BytesPerRecord >= r.BytesPerRecord || small.BytesPerRecord > 100 {
		t.Fatalf("listpack layout: %.1f bytes per record (hashtable: %.1f)", small.BytesPerRecord, r.BytesPerRecord)
	}
	// With a history (the default) each record carries its first attempt's
	// entry: larger, and never a listpack.
	h := setupOn(t, srv.Client(t), "caph:", nil)
	hr, err := h.s.Capacity(t.Context(), 100, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if hr.Listpack || hr.BytesPerRecord <= small.BytesPerRecord+100 || hr.BytesPerRecord > 1000 {
		t.Fatalf("with a history: %+v (without: %.1f bytes per record)", hr, small.BytesPerRecord)
	}
	t.Logf("100/s with a history: %+v", hr)

	// A bucket's expiry: measured by deleting the sample buckets, on a server
	// that frees in one step (Redis's own defaults).
	if r.LazyfreeExpire != "no" || r.FreeMicrosPerRecord <= 0 || r.FreeMicrosPerRecord > 50 ||
		math.Abs(float64(r.BucketFree)-r.FreeMicrosPerRecord*r.RecordsPerBucket*1e3) > 1e3 {
		t.Errorf("bucket expiry at 1000/s: lazyfree-lazy-expire %q, %.3f us a record, %s a bucket of %.1f",
			r.LazyfreeExpire, r.FreeMicrosPerRecord, r.BucketFree, r.RecordsPerBucket)
	}
	// A server that frees in the background: DEL measures nothing, and the
	// report says that an expiring bucket blocks nothing.
	for _, name := range []string{"lazyfree-lazy-user-del", "lazyfree-lazy-expire"} {
		must(t, srv.Client(t).ConfigSet(t.Context(), name, "yes").Err())
	}
	lazy, err := e.s.Capacity(t.Context(), 1000, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if lazy.LazyfreeExpire != "yes" || lazy.FreeMicrosPerRecord != 0 || lazy.BucketFree != 0 {
		t.Errorf("with lazy frees: lazyfree-lazy-expire %q, %.3f us a record, %s a bucket",
			lazy.LazyfreeExpire, lazy.FreeMicrosPerRecord, lazy.BucketFree)
	}
}
