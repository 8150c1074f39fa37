// Command luacost measures what the pieces of a Redis script cost Redis, to
// tell where the claim and completion scripts spend their time a job. On a
// private redis-server it runs small scripts, each a call over a batch of
// entries (as the Store's calls are), and reads the Redis main thread's CPU
// around them. Each piece is measured as the difference between a script
// that does it once an entry and a baseline that passes one key and one
// argument an entry and does nothing else, so the per-call cost of EVALSHA
// cancels out (for keys and arguments, the difference is divided by the
// extra ones passed). It prints one figure a line (name=value unit), each the median of
// -rounds rounds:
//
//	lua_key_us             passing one more key (a 30-byte KEYS element) an entry
//	lua_arg_us             passing one more argument (a 16-byte ARGV element) an entry
//	lua_hget_miss_us       redis.call('HGET') of a missing field: the call and the command
//	lua_number_text_us     a number made text (string.format('%.0f') of a fence)
//	lua_concat_us          an entry's JSON built by concatenation (idem_claim.lua's startEntry)
//	lua_struct_pack_us     struct.pack of a record header
//	lua_reply_table_us     one 7-element table built (idem_claim.lua's answer an entry until 2026-11-27)
//	lua_reply_table_sent_us  the same table returned: built, made RESP and written to the client
//	lua_reply_packed_sent_us the same seven fields packed into one string (struct.pack) and returned,
//	                       as idem_claim.lua answers a claim that runs the job
//	lua_call_us            one EVALSHA of an empty script with one key and one argument, sent
//	                       alone (a round trip: reading the request, running, writing the reply)
//	host_cpu_*             the CPU's family, model and clock (/proc/cpuinfo), and
//	host_redis_probe_us    benchkit.RedisProbe: a fixed script's cost, which moves only with the host
//
//	go run ./bench/luacost [-entries 64] [-calls 2000] [-rounds 5]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/benchkit"
)

// piece is one thing measured: a script body run once an entry, with the
// keys and arguments an entry passes, against the baseline.
type piece struct {
	name       string
	body       string // Lua run for entry i (1-based): keys from KEYS[(i-1)*k+1], args from ARGV[(i-1)*a+1]
	keys, args int    // an entry's; the baseline passes one of each
	reply      bool   // the script returns its out table (an element an entry), not its length
}

var pieces = []piece{
	{name: "lua_key_us", body: "", keys: 9, args: 1},
	{name: "lua_arg_us", body: "", keys: 1, args: 9},
	{name: "lua_hget_miss_us", body: "redis.call('HGET', KEYS[i], ARGV[i])", keys: 1, args: 1},
	{name: "lua_number_text_us", body: "local x = string.format('%.0f', 1795734461411719 + i)", keys: 1, args: 1},
	{name: "lua_concat_us", body: `local x = '{"f":"' .. ARGV[i] .. '","a":' .. i .. ',"s":' .. ARGV[i] .. ARGV[i] .. '}'`, keys: 1, args: 1},
	{name: "lua_struct_pack_us", body: "local x = struct.pack('>BI7c8I2', 1, 1795734461411719, 'abcdefgh', 3)", keys: 1, args: 1},
	{name: "lua_reply_table_us", body: "out[i] = {1, 1795734461411719, 1, 0, false, 20000, 0}", keys: 1, args: 1},
	{name: "lua_reply_table_sent_us", body: "out[i] = {1, 1795734461411719, 1, 0, false, 20000, 0}", keys: 1, args: 1,
		reply: true},
	{name: "lua_reply_packed_sent_us", body: "out[i] = struct.pack('>BI7I2I7BI4B', 1, 1795734461411719, 1, 0, 0, 20000, 0)",
		keys: 1, args: 1, reply: true},
}

func script(body string, perEntry int, reply bool) *redis.Script {
	ret := "#out"
	if reply {
		ret = "out"
	}
	return redis.NewScript(fmt.Sprintf("local out = {}\nfor i = 1, #ARGV / %d do\n%s\nend\nreturn %s", perEntry, body, ret))
}

func main() {
	entries := flag.Int("entries", 64, "entries a call (the Store sends up to 64 keys a call)")
	calls := flag.Int("calls", 2000, "calls a measurement")
	rounds := flag.Int("rounds", 5, "rounds (median reported)")
	flag.Parse()
	if *entries <= 0 || *calls <= 0 || *rounds <= 0 {
		fmt.Fprintln(os.Stderr, "luacost: -entries, -calls and -rounds must be positive")
		os.Exit(2)
	}
	if err := run(*entries, *calls, *rounds); err != nil {
		log.Fatalf("luacost: %v", err)
	}
}

func run(entries, calls, rounds int) error {
	ctx := context.Background()
	srv, err := benchkit.StartRedis("")
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	defer srv.Stop()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = c.Close() }()
	got := make(map[string][]float64)
	for range rounds {
		for _, p := range pieces {
			with, err := perEntry(ctx, c, script(p.body, p.args, p.reply), entries, calls, p.keys, p.args)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			base, err := perEntry(ctx, c, script("", 1, false), entries, calls, 1, 1)
			if err != nil {
				return fmt.Errorf("%s baseline: %w", p.name, err)
			}
			d := with - base
			switch p.name { // per key or argument, not per entry
			case "lua_key_us":
				d /= float64(p.keys - 1)
			case "lua_arg_us":
				d /= float64(p.args - 1)
			}
			got[p.name] = append(got[p.name], d)
		}
	}
	var call []float64
	for range rounds {
		v, err := perEntry(ctx, c, script("", 1, false), 1, calls*entries/8, 1, 1)
		if err != nil {
			return fmt.Errorf("lua_call_us: %w", err)
		}
		call = append(call, v)
	}
	got["lua_call_us"] = call
	fig := benchkit.NewFigures(os.Stdout)
	for _, p := range append(pieces, piece{name: "lua_call_us"}) {
		v := got[p.name]
		slices.Sort(v)
		fig.Float(p.name, v[len(v)/2], 3, "us")
	}
	fig.Int("entries_per_call", int64(entries), "entries")
	// What the figures were measured on: they compare with another run's
	// only where the CPU and the probe agree.
	benchkit.ReadCPU().Print(fig)
	probe, err := benchkit.RedisProbe(ctx, c, "luacost:probe", rounds)
	if err != nil {
		return fmt.Errorf("host probe: %w", err)
	}
	fig.Float("host_redis_probe_us", probe, 3, "us")
	return fig.Err()
}

// perEntry runs s calls times over entries entries of keys keys and args
// arguments each, and returns the Redis main thread's CPU an entry, in µs.
func perEntry(ctx context.Context, c *redis.Client, s *redis.Script, entries, calls, keys, args int) (float64, error) {
	ks := make([]string, entries*keys)
	for i := range ks {
		ks[i] = fmt.Sprintf("lh:idem:b:{i:%05d}:%07d", i%65536, 20000+i%3)
	}
	as := make([]any, entries*args)
	for i := range as {
		as[i] = strings.Repeat(string(rune('a'+i%26)), 16)
	}
	if err := s.Load(ctx, c).Err(); err != nil {
		return 0, err
	}
	before, err := benchkit.RedisMainCPU(ctx, c)
	if err != nil {
		return 0, err
	}
	for range calls {
		if err := s.EvalSha(ctx, c, ks, as...).Err(); err != nil {
			return 0, err
		}
	}
	after, err := benchkit.RedisMainCPU(ctx, c)
	if err != nil {
		return 0, err
	}
	return (after - before) * 1e6 / float64(calls*entries), nil
}
