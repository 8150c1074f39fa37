package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/outcome"
)

// CapacityReport is what Capacity measured and estimated.
type CapacityReport struct {
	// BytesPerRecord is the measured used_memory growth per COMPLETED record
	// with an empty result, laid out as the Store lays them out at the given
	// rate (records per bucket as in production); with a history
	// (WithHistory), each carrying the history entry of a first attempt as a
	// traced worker writes it (see History).
	BytesPerRecord float64
	// SampleRecords is how many records the measurement wrote (and deleted).
	SampleRecords int
	// RecordsPerBucket is how many records one (shard, window) bucket holds
	// at the given rate.
	RecordsPerBucket float64
	// Listpack reports whether buckets stay in the compact listpack encoding
	// at that density (RecordsPerBucket <= hash-max-listpack-entries); never
	// with a history, whose entries make a record longer than
	// hash-max-listpack-value.
	Listpack bool
	// MinShards is the smallest shard count (WithShards) that keeps buckets
	// listpacks at the given rate without a history.
	MinShards int
	// PeakRecords is the most records kept at once: rate x (retention + one
	// window), since a bucket expires a window after its last write.
	PeakRecords float64
	// PeakBytes is PeakRecords x BytesPerRecord: the memory the records need,
	// leases and results stored apart not included.
	PeakBytes float64
	// FreeMicrosPerRecord is the server's time to free one record of a
	// bucket in one step, measured by deleting the full sample buckets (DEL)
	// and reading INFO commandstats; zero when not measured: DEL frees in
	// the background (lazyfree-lazy-user-del yes), or the server refused
	// CONFIG GET or INFO. Sample buckets hold at most 4096 records: larger
	// ones take somewhat longer a record (docs/idempotency.md).
	FreeMicrosPerRecord float64
	// BucketFree is FreeMicrosPerRecord x RecordsPerBucket: how long the
	// server is blocked when one bucket expires, unless lazyfree-lazy-expire
	// is on.
	BucketFree time.Duration
	// LazyfreeExpire is the server's lazyfree-lazy-expire: "yes" (an expiring
	// bucket is freed in the background), "no", or "" when CONFIG GET is
	// refused.
	LazyfreeExpire string
}

// CapacitySample is how many records Capacity writes to measure.
const CapacitySample = 20000

// Capacity measures the memory a record takes on the live Redis and
// estimates the memory needed for rate messages per second kept for
// retention (zero: the Store's retention). It writes sample records under a
// scratch prefix (with a 10-minute TTL, in case it is interrupted), reads the
// used_memory growth and deletes them. Other clients writing at the same
// time distort the figure: measure on a quiet server, or repeat.
func (s *Store) Capacity(ctx context.Context, rate float64, retention time.Duration) (CapacityReport, error) {
	if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
		return CapacityReport{}, fmt.Errorf("idempotency: capacity: rate must be positive, got %v", rate)
	}
	retention = cmpDuration(retention, s.cfg.retention)
	window := retention / time.Duration(s.cfg.windows)
	perBucket := rate * window.Seconds() / float64(s.cfg.shards)
	r := CapacityReport{
		SampleRecords:    CapacitySample,
		RecordsPerBucket: perBucket,
		Listpack:         perBucket <= float64(s.entries) && s.cfg.history <= 0,
		MinShards:        int(math.Ceil(rate * window.Seconds() / float64(s.entries))),
		PeakRecords:      rate * (retention + window).Seconds(),
	}
	// Sample buckets as full as production's, bounded so that the sample
	// spans several buckets (past a few thousand entries the cost per record
	// of a hashtable bucket no longer changes).
	density := int(math.Min(math.Max(math.Round(perBucket), 1), 4096))
	scratch := s.cfg.prefix + "idem:capacity:" + strings.ToLower(rand.Text()[:12]) + ":"
	var keys []string
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := 0; i < len(keys); i += 500 {
			p := s.c.Pipeline()
			for _, k := range keys[i:min(i+500, len(keys))] {
				p.Unlink(ctx, k)
			}
			_, _ = p.Exec(ctx)
		}
	}()
	before, err := s.usedMemory(ctx)
	if err != nil {
		return r, err
	}
	now := s.redisNow()
	entry := s.sampleEntry(now)
	p := s.c.Pipeline()
	var field [16]byte
	for i := range CapacitySample {
		if i%density == 0 {
			keys = append(keys, scratch+"{i:"+strconv.Itoa(len(keys))+"}:"+strconv.FormatInt(now.UnixMilli(), 10))
		}
		k := keys[len(keys)-1]
		_, _ = rand.Read(field[:])
		p.HSet(ctx, k, string(field[:]), sampleRecord(now, entry))
		if i%density == 0 {
			p.PExpire(ctx, k, 10*time.Minute)
		}
		if p.Len() >= 1000 {
			if _, err := p.Exec(ctx); err != nil {
				return r, fmt.Errorf("idempotency: capacity: %w", classify(err))
			}
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		return r, fmt.Errorf("idempotency: capacity: %w", classify(err))
	}
	after, err := s.usedMemory(ctx)
	if err != nil {
		return r, err
	}
	r.BytesPerRecord = float64(after-before) / CapacitySample
	r.PeakBytes = r.PeakRecords * r.BytesPerRecord
	return s.expiryCost(ctx, r, keys, density), nil
}

// expiryCost returns r with the figures of a bucket's expiry
// (LazyfreeExpire, FreeMicrosPerRecord, BucketFree): it deletes the full
// sample buckets, keys[i] holding density records, with DEL. A figure the
// server does not give is left zero: the memory estimate stands without it.
func (s *Store) expiryCost(ctx context.Context, r CapacityReport, keys []string, density int) CapacityReport {
	r.LazyfreeExpire = s.configString(ctx, "lazyfree-lazy-expire")
	full := min(len(keys), CapacitySample/density)
	if s.configString(ctx, "lazyfree-lazy-user-del") != "no" || full == 0 {
		return r
	}
	before, err := s.infoSum(ctx, "commandstats", delMicros)
	if err != nil {
		return r
	}
	p := s.c.Pipeline()
	for _, k := range keys[:full] {
		p.Del(ctx, k)
	}
	if _, err := p.Exec(ctx); err != nil {
		return r
	}
	after, err := s.infoSum(ctx, "commandstats", delMicros)
	if err != nil || after <= before {
		return r
	}
	r.FreeMicrosPerRecord = float64(after-before) / float64(full*density)
	r.BucketFree = time.Duration(r.FreeMicrosPerRecord * r.RecordsPerBucket * float64(time.Microsecond))
	return r
}

// delMicros reads DEL's server time so far, in microseconds, from an INFO
// commandstats text (0 before the first DEL).
func delMicros(info string) (int64, error) {
	for _, line := range strings.Split(info, "\r\n") {
		stats, ok := strings.CutPrefix(line, "cmdstat_del:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, errors.New("idempotency: INFO commandstats has no usec for DEL")
	}
	return 0, nil
}

// configString reads a server setting (a node's, on a Cluster); "" when the
// server refuses CONFIG GET or has no such setting.
func (s *Store) configString(ctx context.Context, name string) string {
	res, err := s.c.ConfigGet(ctx, name).Result()
	if err != nil {
		return ""
	}
	return res[name]
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// usedMemory returns used_memory, summed over the masters of a Cluster.
func (s *Store) usedMemory(ctx context.Context) (int64, error) {
	return s.infoSum(ctx, "memory", func(info string) (int64, error) {
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, errors.New("idempotency: INFO memory has no used_memory")
	})
}

// infoSum reads a figure from INFO section with parse, summed over the
// masters of a Cluster.
func (s *Store) infoSum(ctx context.Context, section string, parse func(info string) (int64, error)) (int64, error) {
	read := func(ctx context.Context, c redis.Cmdable) (int64, error) {
		info, err := c.Info(ctx, section).Result()
		if err != nil {
			return 0, fmt.Errorf("idempotency: INFO %s: %w", section, classify(err))
		}
		return parse(info)
	}
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return read(ctx, s.c)
	}
	var (
		mu    sync.Mutex
		total int64
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := read(ctx, c)
		mu.Lock()
		total += n
		mu.Unlock()
		return err
	})
	return total, err
}

// sampleRecord is a COMPLETED record of a first attempt at now with a random
// fingerprint, carrying history entry entry (nil: none).
func sampleRecord(now time.Time, entry []byte) []byte {
	var f Fingerprint
	_, _ = rand.Read(f[:])
	return encodeRecord(Record{State: Completed, Fence: uint64(now.UnixMicro()), Fingerprint: f, Attempt: 1, At: now, entry: entry}, false)
}

// sampleEntry is the history entry that a COMPLETED record of a first
// attempt carries, as a traced worker's claim and completion write it at
// now; nil when the store keeps no history.
func (s *Store) sampleEntry(now time.Time) []byte {
	if s.cfg.history <= 0 {
		return nil
	}
	start := s.startEntry(rand.Text(), &Request{Worker: "worker-7f9c8d6b5-x2k4q/12345", Type: "payments.transfer",
		TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331"})
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli())) //nolint:gosec // a time after 1970
	e := append([]byte(start), ms[2:]...)
	return append(e, outcome.Completed...)
}
