package chaos

import (
	"crypto/sha1" //nolint:gosec // Redis names scripts by their SHA-1
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasehold/leasehold/internal/scripts"
)

// History records the operations on the idempotency records that the
// workers run in Redis, as their links see them go by (see [Link] and
// [Tap]): the claims, commits and releases, each with the time its request
// was passed on to Redis (call) and the time its reply came back (return),
// so that Redis ran it in between. Requests whose reply never came back
// (the connection ended first) are kept as ambiguous. The downstream writes
// are added from the workers' logs ([History.AddWrite]).
type History struct {
	scripts map[string]string // SHA-1 -> script file name

	mu        sync.Mutex
	ops       []porcupine.Operation
	clients   map[string]int             // worker -> porcupine client id
	badStream int                        // connections whose bytes did not parse as RESP
	running   map[string]map[string]bool // worker -> keys it was granted and has not finished
}

// NewHistory returns an empty history.
func NewHistory() *History {
	h := &History{scripts: map[string]string{}, clients: map[string]int{}, running: map[string]map[string]bool{}}
	for name, s := range scripts.All() {
		h.scripts[s.Hash()] = name
	}
	return h
}

// The scripts whose calls are operations of the model.
const (
	scriptClaim         = "idem_claim.lua"
	scriptComplete      = "idem_complete.lua"
	scriptCompleteBatch = "idem_complete_batch.lua"
	scriptRelease       = "idem_release.lua"
)

// Operations returns the operations recorded so far.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Unparsed returns how many connections carried bytes that were not RESP
// (their operations from then on are missing from the history).
func (h *History) Unparsed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.badStream
}

// Meta is an operation's metadata: the worker that ran it.
type Meta struct {
	Worker string
}

func (h *History) add(worker string, op Op, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id, ok := h.clients[worker]
	if !ok {
		id = len(h.clients)
		h.clients[worker] = id
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: id, Input: op, Output: op.Out, Call: call, Return: ret,
		Metadata: Meta{Worker: worker}})
	switch {
	case op.Kind == OpClaim && (op.Out.Code == ClaimAcquired || op.Out.Code == ClaimTakeover) && !op.Out.Unknown:
		if h.running[worker] == nil {
			h.running[worker] = map[string]bool{}
		}
		h.running[worker][op.Key] = true
	case op.Kind == OpCommit || op.Kind == OpRelease:
		delete(h.running[worker], op.Key)
	}
}

// Running returns how many keys each worker was granted and has not
// committed or released yet (as far as its link saw): the jobs it has in
// flight, give or take the ones it lost.
func (h *History) Running() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.running))
	for w, keys := range h.running {
		out[w] = len(keys)
	}
	return out
}

// AddWrite records a downstream write of key under fence by worker, called
// at call and answered at ret (applied, refused, or unknown for any other
// error).
func (h *History) AddWrite(worker, key string, fence uint64, call, ret time.Time, out OpOutput) {
	if out.Unknown {
		ret = time.Unix(0, math.MaxInt64)
	}
	op := Op{Kind: OpWrite, Key: key, Fence: fence, Out: out}
	h.add(worker, op, call.UnixNano(), ret.UnixNano())
}

// tap returns the Tap of one connection of worker.
func (h *History) tap(worker string) Tap { return &redisTap{h: h, worker: worker} }

// redisTap parses one connection's requests and replies and pairs them in
// order (Redis answers a connection's requests in the order they came).
type redisTap struct {
	h      *History
	worker string

	mu       sync.Mutex
	req, rep []byte
	pending  []pendingReq
	broken   bool
}

type pendingReq struct {
	args []string // nil: not a script call of the model
	call int64
}

func (t *redisTap) Request(p []byte, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken {
		return
	}
	t.req = append(t.req, p...)
	for {
		v, n, err := parseRESP(t.req)
		if errors.Is(err, errIncomplete) {
			break
		}
		if err != nil {
			t.fail()
			return
		}
		t.req = t.req[n:]
		t.pending = append(t.pending, pendingReq{args: t.h.interesting(v), call: at.UnixNano()})
	}
	t.req = compact(t.req)
}

func (t *redisTap) Reply(p []byte, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken {
		return
	}
	t.rep = append(t.rep, p...)
	for {
		v, n, err := parseRESP(t.rep)
		if errors.Is(err, errIncomplete) {
			break
		}
		if err != nil {
			t.fail()
			return
		}
		t.rep = t.rep[n:]
		if v.kind == '>' || v.kind == '|' {
			continue // a push message or an attribute: not the answer to a request
		}
		if len(t.pending) == 0 {
			t.fail()
			return
		}
		r := t.pending[0]
		t.pending = t.pending[1:]
		if r.args != nil {
			t.h.record(t.worker, r.args, &v, r.call, at.UnixNano())
		}
	}
	t.rep = compact(t.rep)
}

// Close records the requests still without an answer as ambiguous.
func (t *redisTap) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.pending {
		if r.args != nil {
			t.h.record(t.worker, r.args, nil, r.call, math.MaxInt64)
		}
	}
	t.pending = nil
}

// fail gives up on a connection whose bytes are not RESP: its requests from
// now on are not recorded, and the ones waiting for an answer are ambiguous.
func (t *redisTap) fail() {
	t.broken = true
	t.req, t.rep = nil, nil
	t.h.mu.Lock()
	t.h.badStream++
	t.h.mu.Unlock()
}

// compact copies a small remainder to a fresh slice, so that a long-lived
// connection does not pin every buffer it ever grew.
func compact(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// interesting returns the arguments of a request that calls one of the
// model's scripts (EVALSHA by SHA-1, or EVAL with its source), the script's
// name first; nil for any other request.
func (h *History) interesting(v respValue) []string {
	if v.kind != '*' || len(v.elems) < 3 {
		return nil
	}
	cmd := strings.ToUpper(string(v.elems[0].str))
	var name string
	switch cmd {
	case "EVALSHA":
		name = h.scripts[strings.ToLower(string(v.elems[1].str))]
	case "EVAL":
		sum := sha1.Sum(v.elems[1].str) //nolint:gosec // Redis names scripts by their SHA-1
		name = h.scripts[hex.EncodeToString(sum[:])]
	default:
		return nil
	}
	switch name {
	case scriptClaim, scriptComplete, scriptCompleteBatch, scriptRelease:
	default:
		return nil
	}
	args := v.args()
	args[0] = name
	return args
}

// record turns one script call and its reply (nil: none came) into
// operations. A NOSCRIPT error means the script did not run; any other
// error leaves the call ambiguous.
func (h *History) record(worker string, args []string, reply *respValue, call, ret int64) {
	nk, err := strconv.Atoi(args[2])
	if err != nil || nk < 0 || 3+nk > len(args) {
		return
	}
	keys, argv := args[3:3+nk], args[3+nk:]
	if reply != nil && reply.isError() {
		if strings.HasPrefix(string(reply.str), "NOSCRIPT") {
			return
		}
		reply = nil
	}
	if reply == nil {
		ret = math.MaxInt64
	}
	for _, op := range decodeCall(args[0], keys, argv, reply) {
		h.add(worker, op, call, ret)
	}
}

// decodeCall returns the operations of one call of script name (the layouts
// are documented at the top of each script in lua/).
func decodeCall(name string, keys, argv []string, reply *respValue) []Op {
	arg := func(i int) string { // ARGV[i], 1-based like Lua
		if i < 1 || i > len(argv) {
			return ""
		}
		return argv[i-1]
	}
	num := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
	small := func(s string) int { n, _ := strconv.Atoi(s); return n }
	entry := func(i int) *respValue {
		if reply == nil || i >= len(reply.elems) {
			return nil
		}
		return &reply.elems[i]
	}
	var ops []Op
	switch name {
	case scriptClaim:
		stride := 5 + small(arg(5)) + small(arg(6)) // lease, details, result, buckets, history, cancel mark
		if arg(9) == "1" {
			stride = 2 + small(arg(5)) + small(arg(6)) // a short call: lease, result, buckets
		}
		for i := 0; stride > 0 && (i+1)*stride <= len(keys); i++ {
			ops = append(ops, Op{Kind: OpClaim, Key: recordKey(keys[i*stride]), Out: claimOutput(entry(i))})
		}
	case scriptComplete:
		if len(keys) > 0 {
			ops = append(ops, Op{Kind: OpCommit, Key: recordKey(keys[0]), Fence: num(arg(2)),
				State: small(arg(9)), Result: arg(12), Out: codeOutput(reply)})
		}
	case scriptCompleteBatch:
		stride := 5 + small(arg(4)) // lease, details, result, claim bucket, buckets, history
		if arg(7) == "1" {
			stride = 2 // a short call: lease, claim bucket
		}
		for i := 0; stride > 0 && (i+1)*stride <= len(keys); i++ {
			a := 8 + i*2 // the entry's packed fields, then its result
			state, fence := packedCompletion(arg(a))
			ops = append(ops, Op{Kind: OpCommit, Key: recordKey(keys[i*stride]), Fence: fence,
				State: state, Result: arg(a + 1), Out: codeOutput(entry(i))})
		}
	case scriptRelease:
		if len(keys) > 0 {
			ops = append(ops, Op{Kind: OpRelease, Key: recordKey(keys[0]), Fence: num(arg(2)), Out: codeOutput(reply)})
		}
	}
	return ops
}

// packedCompletion reads the state and the fence of an entry's packed fields
// in idem_complete_batch.lua (bytes from 0: the state, three flags, the
// history end, a zero, the record's state byte, then the fence in 7 bytes);
// -1 and 0 when too short.
func packedCompletion(p string) (state int, fence uint64) {
	if len(p) < 14 {
		return -1, 0
	}
	return int(p[0]), uint56(p[7:14])
}

// recordKey returns the idempotency key of a lease key
// (`<prefix>lease:{<tag>}:<key>`).
func recordKey(leaseKey string) string {
	if i := strings.Index(leaseKey, "}:"); i >= 0 {
		return leaseKey[i+2:]
	}
	return leaseKey
}

func codeOutput(v *respValue) OpOutput {
	if v == nil {
		return OpOutput{Unknown: true}
	}
	c, ok := v.int()
	if !ok {
		return OpOutput{Unknown: true}
	}
	return OpOutput{Code: c}
}

// claimOutput decodes one entry of idem_claim.lua's reply: a packed string
// when the claim runs the job (acquired, takeover), else a table.
func claimOutput(v *respValue) OpOutput {
	if v != nil && v.kind == '$' && !v.null {
		return runningOutput(v.str)
	}
	if v == nil || len(v.elems) == 0 {
		return OpOutput{Unknown: true}
	}
	code, ok := v.elems[0].int()
	if !ok {
		return OpOutput{Unknown: true}
	}
	out := OpOutput{Code: code}
	el := func(i int) respValue {
		if i < len(v.elems) {
			return v.elems[i]
		}
		return respValue{}
	}
	if code == ClaimDuplicate {
		out.State, out.Fence, out.Result = decodeRecord(el(1).str, el(2).str)
	}
	return out
}

// runningOutput decodes an acquired or takeover reply (idem_claim.lua's
// '>BI7I2I7I7BB', then the heartbeat details): its code, fence and
// previous fence.
func runningOutput(p []byte) OpOutput {
	if len(p) < 26 || p[0] != ClaimAcquired && p[0] != ClaimTakeover {
		return OpOutput{Unknown: true}
	}
	return OpOutput{Code: int64(p[0]), Fence: uint56(p[1:8]), Prev: uint56(p[10:17])}
}

// uint56 reads the big-endian 7-byte unsigned integer at the start of b
// (struct format I7).
func uint56[T string | []byte](b T) uint64 {
	var v uint64
	for i := range 7 {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// decodeRecord reads a finished record (layout in lua/idem_claim.lua): its
// state, fence and result (inline, or ext when the state's +16 flag says it
// lives in the external result key; after the history entry the record
// carries when the +32 flag says so).
func decodeRecord(rec, ext []byte) (state int, fence uint64, result string) {
	header := 18 + 4 // state, fence, fingerprint, attempt; then unix seconds
	if len(rec) < 8 {
		return -1, 0, ""
	}
	state = int(rec[0])
	fence = uint56(rec[1:8])
	if state&32 != 0 {
		state &^= 32
		if len(rec) < 20 {
			return -1, fence, ""
		}
		header += 2 + int(binary.BigEndian.Uint16(rec[18:20]))
	}
	if state&16 != 0 {
		return state &^ 16, fence, string(ext)
	}
	if len(rec) >= header {
		result = string(rec[header:])
	}
	return state, fence, result
}
