package leasehold

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareAckBeforeLeavingRound: a record's final acknowledgement (accept
// or release) is made while the record still counts in the round, and only
// once. The dispatcher polls as soon as it sees the round empty, and
// franz-go's poll accepts every record of the last poll that has no final
// acknowledgement yet: a release made after its record left the round
// could land after that poll, find the record accepted, and the retry it
// stood for would be lost. (With the acknowledgement made after the record
// left the round, as before, the record was no longer in it: fails.)
func TestShareAckBeforeLeavingRound(t *testing.T) {
	t.Parallel()
	for _, status := range []kgo.AckStatus{kgo.AckAccept, kgo.AckRelease} {
		w := &Worker{sched: newSchedule(false, func() {})}
		rec, other := &kgo.Record{Offset: 1}, &kgo.Record{Offset: 2}
		d := &delivery{rec: rec, key: "k"}
		var acks []string
		w.share = &shareState{round: map[*kgo.Record]*delivery{rec: d, other: {rec: other}},
			ack: func(r *kgo.Record, s kgo.AckStatus) {
				_, in := w.share.round[r] // the caller holds the round's lock, or nobody else touches it here
				acks = append(acks, s.String())
				if !in {
					t.Errorf("%v of offset %d made after the record left the round (pending %d): a poll may accept it first",
						s, r.Offset, len(w.share.round))
				}
			}}
		w.shareAck(d, status)
		w.shareAck(d, status) // a second final acknowledgement of the same delivery is not made
		if len(acks) != 1 || acks[0] != status.String() {
			t.Errorf("acknowledgements made: %v, want [%v]", acks, status)
		}
		if n := w.share.pending(); n != 1 {
			t.Errorf("pending after the acknowledgement: %d, want 1 (the other record)", n)
		}
	}
}
