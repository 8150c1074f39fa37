package deadletter

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readerCluster starts a kfake cluster of one broker (so that every
// partition has the same leader and a client's connections do not depend on
// the partitions it reads) holding topic with parts partitions of n records
// each, value "p<partition>-<offset>", and counts the connections clients
// open to it (each starts with an ApiVersions request).
func readerCluster(t *testing.T, topic string, parts int32, n int) (*kfake.Cluster, *atomic.Int64) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range parts {
		for o := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, o)})
		}
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	kc.ControlKey(kmsg.ApiVersions.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		conns.Add(1)
		return nil, nil, false // counted, then served as usual
	})
	return kc, &conns
}

// scanEach reads topic's partitions 0..parts-1 in turn, each from offset
// from to its end, with one Reader (or, with oneShot, with a Scan of its own
// each, as a page did before it had a Reader), and returns the connections
// opened meanwhile. It fails t unless each read calls fn with exactly its
// partition's records from there, in order.
func scanEach(t *testing.T, kc *kfake.Cluster, conns *atomic.Int64, topic string, parts int32, from, n int, oneShot bool) int64 {
	t.Helper()
	before := conns.Load()
	opts := []kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...)}
	rd, err := NewReader(opts, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	end, err := EndOffsets(t.Context(), rd.Client(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		var got []string
		fn := func(r *kgo.Record) bool {
			got = append(got, fmt.Sprintf("%d:%d:%s", r.Partition, r.Offset, r.Value))
			return true
		}
		from, to := map[int32]int64{p: int64(from)}, map[int32]int64{p: end[p]}
		if oneShot {
			err = Scan(t.Context(), rd.Client(), opts, topic, from, to, fn)
		} else {
			err = rd.Scan(t.Context(), from, to, fn)
		}
		if err != nil {
			t.Fatalf("scan partition %d: %v", p, err)
		}
		if len(got) != n-int(from[p]) {
			t.Fatalf("partition %d: %d records, want %d: %v", p, len(got), n-int(from[p]), got)
		}
		for i, g := range got {
			o := int(from[p]) + i
			if want := fmt.Sprintf("%d:%d:p%d-%d", p, o, p, o); g != want {
				t.Fatalf("partition %d, record %d: %s, want %s", p, i, g, want)
			}
		}
	}
	return conns.Load() - before
}

// TestReaderReadsPartitionsInTurnOnOneClient checks that a Reader reading
// partition after partition, as a page of the dead-letter topic does, gets
// each partition's records alone, from the offset asked, over one client:
// each later partition costs at most one connection (the fetch connection,
// which the client closes to end the long poll of the partition it no
// longer reads), where a client a partition costs a new set.
func TestReaderReadsPartitionsInTurnOnOneClient(t *testing.T) {
	t.Parallel()
	const topic, parts, n = "dlq-reader", 4, 20
	kc, conns := readerCluster(t, topic, parts, n)
	one := scanEach(t, kc, conns, topic, 1, 5, n, false)
	four := scanEach(t, kc, conns, topic, parts, 5, n, false)
	clients := scanEach(t, kc, conns, topic, parts, 5, n, true)
	t.Logf("connections: one partition %d, %d partitions on one Reader %d, with a client each %d", one, parts, four, clients)
	if one == 0 {
		t.Fatal("no connection counted: the ApiVersions count does not see the Reader's client")
	}
	if four > one+parts-1 {
		t.Fatalf("reading %d partitions in turn opened %d connections, reading one opened %d: want at most one more a partition",
			parts, four, one)
	}
	if clients <= four {
		t.Fatalf("a client a partition opened %d connections, one Reader %d: the count does not tell them apart", clients, four)
	}
}
