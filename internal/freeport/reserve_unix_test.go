//go:build unix

package freeport

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// otherProcessLock takes p's lock file through its own open file description,
// which flock treats as another holder, as it would a second process.
func otherProcessLock(t *testing.T, p int) (*os.File, error) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(reserveDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) //nolint:gosec // a file descriptor fits an int
}

func TestPortIsReservedAgainstOtherProcesses(t *testing.T) {
	p, err := Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherProcessLock(t, p); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("another holder's flock on port %d: %v, want EWOULDBLOCK", p, err)
	}
}

func TestReserveRefusesAPortHeldElsewhere(t *testing.T) {
	defer func(d string) { reserveDir = d }(reserveDir)
	reserveDir = t.TempDir()
	const p = 23456
	if _, err := otherProcessLock(t, p); err != nil {
		t.Fatal(err)
	}
	if reserve(p) {
		t.Fatalf("reserve(%d) succeeded while another holder has it", p)
	}
	if !reserve(p + 1) {
		t.Fatalf("reserve(%d) refused a port nobody holds", p+1)
	}
}
