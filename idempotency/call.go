package idempotency

import (
	"context"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// scriptCall is one EVALSHA command being built: "evalsha", the script's
// SHA-1, the number of keys, the keys, then the arguments, in the one slice
// that the command keeps (go-redis's Eval copies keys and arguments into a
// slice of its own and boxes every key).
//
// Keys and arguments that are fields of a Claim or its Request go in as
// strArg: a string in an interface takes an allocation, a strArg (one
// pointer) none, and a claim's entry has about fifteen keys and arguments.
// The first key is a string (go-redis reads it to route a command on a
// Cluster).
type scriptCall struct {
	args  []any
	nkeys int
	key   int // where the next key goes
}

func newScriptCall(s *redis.Script, nkeys, nargs int) scriptCall {
	args := make([]any, 3+nkeys, 3+nkeys+nargs)
	args[0], args[1], args[2] = "evalsha", s.Hash(), nkeys
	return scriptCall{args: args, nkeys: nkeys, key: 3}
}

// addKey adds a key: a string or a strArg.
func (c *scriptCall) addKey(k any) {
	c.args[c.key] = k
	c.key++
}

// addArgs adds arguments.
func (c *scriptCall) addArgs(a ...any) { c.args = append(c.args, a...) }

// process queues the command on p.
func (c *scriptCall) process(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	c.checkKeys()
	cmd := redis.NewCmd(ctx, c.args...)
	cmd.SetFirstKeyPos(3)
	_ = p.Process(ctx, cmd)
	return cmd
}

// checkKeys panics unless every key slot was filled: a bug in the caller,
// which every test of the call would hit.
func (c *scriptCall) checkKeys() {
	if c.key != 3+c.nkeys {
		panic("idempotency: script call keys miscounted")
	}
}

// keyStrings returns the call's keys as strings.
func (c *scriptCall) keyStrings() []string {
	c.checkKeys()
	out := make([]string, 0, c.nkeys)
	for _, k := range c.args[3:c.key] {
		switch v := k.(type) {
		case string:
			out = append(out, v)
		case strArg:
			out = append(out, *v.p)
		}
	}
	return out
}

// argv returns the call's arguments.
func (c *scriptCall) argv() []any { return c.args[3+c.nkeys:] }

// strArg is a script key or argument that lives in a Claim or its Request
// until the pipeline has run: go-redis writes it (an encoding.BinaryMarshaler)
// as the string's bytes, and whatever prints a command (redisotel's
// db.statement, go-redis's Cluster routing) reads it with String.
type strArg struct{ p *string }

// arg returns p's string as a script key or argument.
func arg(p *string) strArg { return strArg{p} }

// MarshalBinary returns the string's bytes without a copy: go-redis only
// writes them to its connection buffer.
func (a strArg) MarshalBinary() ([]byte, error) {
	return unsafe.Slice(unsafe.StringData(*a.p), len(*a.p)), nil //nolint:gosec // read-only view of an immutable string, written out at once (see strArg)
}

// String returns the string.
func (a strArg) String() string { return *a.p }

// bytesArg is strArg for a byte slice that lives in the caller until the
// pipeline has run (a completion's result): a slice put in an interface
// takes an allocation, a bytesArg none.
type bytesArg struct{ p *[]byte }

// MarshalBinary returns the bytes: go-redis only writes them to its
// connection buffer.
func (a bytesArg) MarshalBinary() ([]byte, error) { return *a.p, nil }

// String returns the bytes as a string.
func (a bytesArg) String() string { return string(*a.p) }
