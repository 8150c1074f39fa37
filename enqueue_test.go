package leasehold

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/idempotency"
)

// TestValidateKeyAgrees: the worker's and the idempotency store's key checks
// are one rule: a key one accepts the other accepts, and a refused key is
// ErrInvalidKey from both (a job type follows the same rule).
func TestValidateKeyAgrees(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"order-1", true}, {"日本語", true}, {"{tag}*?[x]", true}, {strings.Repeat("k", MaxKeyLen), true},
		{"", false}, {strings.Repeat("k", MaxKeyLen+1), false}, {"caf\xc3", false},
		{"a b", false}, {"a\tb", false}, {"a\u00a0b", false}, {"a\u2028b", false}, {"a\u3000b", false},
		{"a\x00b", false}, {"\x7f", false}, {"\u0085", false}, {"\u009f", false},
	} {
		lerr, ierr := ValidateKey(tc.key), idempotency.ValidateKey(tc.key, MaxKeyLen)
		if (lerr == nil) != tc.ok || (ierr == nil) != tc.ok {
			t.Errorf("key %q: leasehold.ValidateKey %v, idempotency.ValidateKey %v; want accepted=%v", tc.key, lerr, ierr, tc.ok)
		}
		if !tc.ok && (!errors.Is(lerr, ErrInvalidKey) || !errors.Is(ierr, idempotency.ErrInvalidKey)) {
			t.Errorf("key %q: errors %v and %v, want ErrInvalidKey", tc.key, lerr, ierr)
		}
		if terr := ValidateType(tc.key); (terr == nil) != tc.ok || (terr != nil && !errors.Is(terr, ErrInvalidJobType)) {
			t.Errorf("type %q: ValidateType %v, want accepted=%v or ErrInvalidJobType", tc.key, terr, tc.ok)
		}
	}
}
