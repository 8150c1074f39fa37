package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

func cmdVersion(_ context.Context, e *Env, args []string) error {
	f := newFlags(e, "version", "")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	_, err := fmt.Fprint(e.Stdout, versionText())
	return err
}

// versionText is the module's version, the VCS revision and time the binary
// was built from (when the build recorded them) and the Go version.
func versionText() string {
	path, version := "github.com/leasehold/leasehold", "unknown"
	var rev, at, modified string
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path != "" {
			path = bi.Main.Path
		}
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (with uncommitted changes)"
				}
			}
		}
	}
	out := fmt.Sprintf("worker %s %s\n", path, version)
	if rev != "" {
		out += fmt.Sprintf("revision %s%s\n", rev, modified)
	}
	if at != "" {
		out += fmt.Sprintf("committed %s\n", at)
	}
	return out + fmt.Sprintf("go %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
