package fleet

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testkit.Main(m),
		// go-redis pools closed at cleanup may leave a reader draining briefly.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
