package slot_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/slot"
)

func TestOf(t *testing.T) {
	t.Parallel()
	// Values answered by CLUSTER KEYSLOT (the first four are also in the
	// Redis documentation and the cluster specification).
	for key, want := range map[string]uint16{
		"somekey":        11058,
		"foo{hash_tag}":  2515,
		"bar{hash_tag}":  2515,
		"123456789":      12739,
		"foo":            12182,
		"":               0,
		"{user1000}.a":   slot.Of("user1000"),
		"lh:lease:{job}": slot.Of("job"),
		"a{}b":           slot.Of("a{}b"), // an empty tag: the whole key
		"a{}{b}":         slot.Of("a{}{b}"),
		"lh:lease:x{t}y": slot.Of("t"),
		"{i:7}":          slot.Of("i:7"),
		"x{a}{b}":        slot.Of("a"), // the first tag only
	} {
		if got := slot.Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
}
