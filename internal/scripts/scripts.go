// Package scripts loads the Redis scripts in lua/ and names their status
// codes. Each .lua file there is exported as a *redis.Script; every script
// starts with a comment block that names its KEYS, ARGV and return codes;
// scripts return integer status codes (or arrays whose first element is one)
// that the Go packages map to sentinel errors.
//
// Scripts that write on behalf of a lease holder are built with [Fenced]: the
// fence prelude (fence_prelude.lua) runs first and returns [StatusLost] unless
// KEYS[1] is a lease key still held with token ARGV[1] and fence ARGV[2]. The
// body of a fenced script therefore sees its own keys from KEYS[2] and its own
// arguments from ARGV[3]. idem_complete.lua, idem_complete_batch.lua and
// idem_release.lua are plain scripts that make the same check themselves, in
// the same KEYS/ARGV layout and with the same status, so that a resend of
// their own write (whose first answer was lost, after it deleted the lease)
// can be recognised. The claim and the reset scripts are built with
// [PlainWith] and entry_prelude.lua, which defines the functions that turn a
// record's history entry into a list entry. A file named *_prelude.lua is a
// part of other scripts, not a script.
package scripts

import (
	"fmt"
	"sort"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/lua"
)

// files is the scripts' source, kept in lua/ where the project's layout puts
// them.
var files = lua.FS

// StatusLost is the status every fenced script returns when the caller no
// longer holds the lease with the token and fence it passed.
const StatusLost = -1

var (
	mu       sync.Mutex
	registry = map[string]*redis.Script{}
)

// source returns the text of an embedded script, panicking when it is missing:
// a missing script is a build defect, caught by the package tests.
func source(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("lua: no embedded script %q: %v", name, err))
	}
	return string(b)
}

func register(name, src string) *redis.Script {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("lua: script %q registered twice", name))
	}
	s := redis.NewScript(src)
	registry[name] = s
	return s
}

// Plain returns the script in file name as a *redis.Script.
func Plain(name string) *redis.Script { return register(name, source(name)) }

// PlainWith returns the script in file name with the prelude in file
// prelude in front of it: a prelude that only defines local functions (a
// script cannot include another), such as entry_prelude.lua.
func PlainWith(name, prelude string) *redis.Script {
	return register(name, source(prelude)+"\n"+source(name))
}

// Fenced returns the script in file name with the fence prelude in front of
// it, so that its body runs only while the lease in KEYS[1] is held with token
// ARGV[1] and fence ARGV[2]; otherwise the script returns [StatusLost] and
// writes nothing.
func Fenced(name string) *redis.Script {
	return register(name, source("fence_prelude.lua")+"\n"+source(name))
}

// All returns every registered script by file name, for tests and for
// preloading with SCRIPT LOAD.
func All() map[string]*redis.Script {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]*redis.Script, len(registry))
	for k, v := range registry {
		out[k] = v
	}
	return out
}

// Files lists the embedded .lua files, sorted.
func Files() []string {
	ents, _ := files.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}
