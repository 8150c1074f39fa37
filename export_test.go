package leasehold

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// withCommit replaces how the worker commits its marked offsets (on revoke
// and at shutdown) with f: the tests' crash drops them.
func withCommit(f func(context.Context, *kgo.Client) error) Opt {
	return optFunc(func(c *config) { c.commit = f })
}
