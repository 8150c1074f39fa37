package jobtrace_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testkit.Main(m))
}
