package compensation

import (
	"fmt"
	"strconv"
	"strings"
)

// Ref names one journal: the lease name the job ran under and the fence of
// that attempt.
type Ref struct {
	Name  string
	Fence uint64
}

// String formats r as "fence:name", the form used in the journal indexes.
func (r Ref) String() string { return strconv.FormatUint(r.Fence, 10) + ":" + r.Name }

// ParseRef parses the form written by [Ref.String].
func ParseRef(s string) (Ref, error) {
	f, name, ok := strings.Cut(s, ":")
	n, err := strconv.ParseUint(f, 10, 64)
	if !ok || err != nil || name == "" || n == 0 {
		return Ref{}, fmt.Errorf("%w: journal reference %q", ErrInvalid, s)
	}
	return Ref{Name: name, Fence: n}, nil
}

// tagged returns name when it carries a Redis Cluster hash tag (the lease
// package honours it too), else name wrapped in one, so that a journal lands
// in its job lease's slot.
func tagged(name string) string {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '}'); j > 0 {
			return name
		}
	}
	return "{" + name + "}"
}

func (r *Runner) journalKey(ref Ref) string {
	return r.cfg.prefix + "comp:j:" + tagged(ref.Name) + ":" + strconv.FormatUint(ref.Fence, 10)
}

func (r *Runner) fencesKey(name string) string { return r.cfg.prefix + "comp:f:" + tagged(name) }

func (r *Runner) indexKey() string { return r.cfg.prefix + "comp:index" }

func (r *Runner) deadKey() string { return r.cfg.prefix + "comp:dead" }

// compLeaseName names the lease under which one journal is compensated; it
// shares the journal's hash tag.
func compLeaseName(ref Ref) string {
	return "comp:" + tagged(ref.Name) + ":" + strconv.FormatUint(ref.Fence, 10)
}
