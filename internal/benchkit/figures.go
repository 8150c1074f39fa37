package benchkit

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Figures prints a benchmark's figures, one line each: `name=value unit`, or
// `name=value` for a figure without a unit (a ratio). The first error (a
// malformed name or unit, or a failed write) is kept and reported by Err;
// the lines after it are not written.
type Figures struct {
	w   io.Writer
	err error
}

// NewFigures returns a Figures that writes to w.
func NewFigures(w io.Writer) *Figures { return &Figures{w: w} }

// Float prints v with prec digits after the decimal point
// (Float("speedup", 3.14159, 1, "x") prints "speedup=3.1 x").
func (f *Figures) Float(name string, v float64, prec int, unit string) {
	f.line(name, strconv.FormatFloat(v, 'f', prec, 64), unit)
}

// Int prints v as an integer (Int("leases_held", 10000, "leases") prints
// "leases_held=10000 leases").
func (f *Figures) Int(name string, v int64, unit string) {
	f.line(name, strconv.FormatInt(v, 10), unit)
}

// Millis prints d in milliseconds with one decimal and the unit ms
// (Millis("renew_ms", 59640*time.Microsecond) prints "renew_ms=59.6 ms").
func (f *Figures) Millis(name string, d time.Duration) {
	f.Float(name, float64(d)/float64(time.Millisecond), 1, "ms")
}

// Err returns the first error met, or nil if every line was written.
func (f *Figures) Err() error { return f.err }

func (f *Figures) line(name, value, unit string) {
	if f.err != nil {
		return
	}
	if !validName(name) || strings.ContainsAny(unit, " \t\r\n=") {
		f.err = fmt.Errorf("%w: name %q, unit %q", ErrFigure, name, unit)
		return
	}
	s := name + "=" + value
	if unit != "" {
		s += " " + unit
	}
	_, f.err = io.WriteString(f.w, s+"\n")
}

// validName reports whether name is non-empty and made of a-z, 0-9 and '_'.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}
