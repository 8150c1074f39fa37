package cli

import (
	"strconv"
	"strings"

	"github.com/leasehold/leasehold"
)

// typeLimitOpts returns the options of --type-limit (checked by check).
func (c *runConfig) typeLimitOpts() []leasehold.Opt {
	limits, _ := parseTypeLimits(c.typeLimits)
	opts := make([]leasehold.Opt, 0, len(limits))
	for typ, n := range limits {
		opts = append(opts, leasehold.WithTypeLimit(typ, n))
	}
	return opts
}

// parseTypeLimits reads `worker run --type-limit`: TYPE=N pairs,
// comma-separated, each N from 1 to 1,000,000, each type once.
func parseTypeLimits(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, pair := range splitList(s) {
		typ, num, ok := strings.Cut(pair, "=")
		typ = strings.TrimSpace(typ)
		n, err := strconv.Atoi(strings.TrimSpace(num))
		switch {
		case !ok || typ == "":
			return nil, usagef("--type-limit %q: want TYPE=N pairs, comma-separated (e.g. payments.charge=4)", pair)
		case err != nil || n < 1 || n > 1_000_000:
			return nil, usagef("--type-limit %q: the limit must be a whole number from 1 to 1000000", pair)
		case out[typ] != 0:
			return nil, usagef("--type-limit names %q twice", typ)
		}
		out[typ] = n
	}
	return out, nil
}
