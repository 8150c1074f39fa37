// Package buildinfo reads the main module's version from the binary's build
// information, for the telemetry that reports it.
package buildinfo

import "runtime/debug"

// Version is the main module's version, "devel" for a work-tree build.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "devel"
	}
	return bi.Main.Version
}
