//go:build unix

package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// held keeps the reservation files open (and so locked) for the life of the
// process; a closed or collected file would drop its lock.
var held []*os.File

// reserveDir is where the reservation files live; a variable for tests.
var reserveDir = filepath.Join(os.TempDir(), "leasehold-freeport")

// reserve takes port p for this process against every other process that
// uses this package: an exclusive flock on a file named after the port, held
// until the process exits (the kernel drops it then, so a killed process
// leaves nothing held). Between a port found free and the server that binds it
// (a JVM takes seconds to start), another test binary running at the same
// time would otherwise find the same port free. It reports false when
// another process holds p; where the files cannot be made it reserves nothing
// and reports true.
func reserve(p int) bool {
	f, err := lockFile(p)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { //nolint:gosec // a file descriptor fits an int
		_ = f.Close()
		return false
	}
	held = append(held, f)
	return true
}

func lockFile(p int) (*os.File, error) {
	if err := os.MkdirAll(reserveDir, 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(reserveDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // our own directory and a port number
}
