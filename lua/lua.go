// Package lua holds every Redis script leasehold runs, as .lua files in this
// directory, exported as one read-only file system for tools that want to
// read, lint or preload them. Each script starts with a comment block that
// names its KEYS, ARGV and return codes; scripts return integer status codes
// (or arrays whose first element is one).
//
// Scripts that write on behalf of a lease holder run with the fence prelude
// (fence_prelude.lua) in front of them: it returns -1 and writes nothing
// unless KEYS[1] is a lease key still held with token ARGV[1] and fence
// ARGV[2], so the body of a fenced script sees its own keys from KEYS[2] and
// its own arguments from ARGV[3]. entry_prelude.lua defines functions that the
// claim and the reset scripts share; it is put in front of them the same way.
//
// The Go side (loading, the status codes, which scripts are fenced) is
// internal to leasehold; docs/design.md describes the layouts the scripts
// keep.
package lua

import "embed"

// FS holds every script, by file name (for example "lease_acquire.lua").
//
//go:embed *.lua
var FS embed.FS
