//go:build linux || darwin || freebsd || netbsd || openbsd

package cli

import (
	"os"
	"syscall"
	"unsafe"
)

// termSize returns the columns and rows of the terminal f is, or 0, 0.
func termSize(f *os.File) (cols, rows int) {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws))) //nolint:gosec // the documented TIOCGWINSZ call
	if errno != 0 {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}
