package lease

import "testing"

func TestKeySlot(t *testing.T) {
	// Values from CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{
		"foo":            12182,
		"123456789":      12739,
		"{user1000}.a":   keySlot("user1000"),
		"lh:lease:{job}": keySlot("job"),
		"a{}b":           keySlot("a{}b"),
		"lh:lease:x{t}y": keySlot("t"),
		"":               0,
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
