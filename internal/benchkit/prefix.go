package benchkit

import (
	"crypto/rand"
	"strings"
)

// KeyPrefix returns base followed by ten random lower-case letters and digits
// and a colon ("bench:renew:" -> "bench:renew:k3x7q2mzab:"), so that a
// benchmark on a shared Redis works under keys no other run uses. The
// result holds no glob characters as long as base holds none, so it can be
// passed to testkit.DeletePrefix.
func KeyPrefix(base string) string {
	return base + strings.ToLower(rand.Text()[:10]) + ":"
}
