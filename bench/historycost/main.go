// Command historycost measures, inside Redis, what the scripts spend on a
// key's attempt history (docs/idempotency.md): the claim's encode of the
// attempt's start entry, and the completion's end of that entry: by decoding
// and re-encoding its JSON, by appending to its JSON text, and by appending
// to the binary entry the worker sends back (as it does now). One script (loop.lua) runs each operation -n
// times over a typical entry and reads Redis TIME around the loop, so a
// figure is Redis's own time an operation, without round trips; the empty
// loop is subtracted. Rounds alternate the operations; the median is
// printed, one figure a line (name=value unit):
//
//	history_start_encode_us          a claim's start entry encoded
//	history_end_decode_encode_us     an entry ended by decode and encode
//	history_end_text_append_us       an entry ended by the text append
//	history_end_saving_us            the difference of the two
//	history_start_text_us            a claim's start entry built as text from the store's members (the JSON form)
//	history_end_carry_us             a completion ending the JSON entry its PROCESSING record carried
//	history_end_binary_us            a completion ending the binary entry the worker sends back (as now)
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/benchkit"
)

//go:embed loop.lua
var loopSrc string

func main() {
	addr := flag.String("addr", "", "Redis address to use (default: start a private redis-server)")
	n := flag.Int("n", 100_000, "operations a loop")
	rounds := flag.Int("rounds", 5, "rounds (the median is printed)")
	flag.Parse()
	if err := run(*addr, *n, *rounds); err != nil {
		log.Fatal(err)
	}
}

func run(addr string, n, rounds int) error {
	if n <= 0 || rounds <= 0 {
		return fmt.Errorf("-n and -rounds must be positive")
	}
	addr, stop, err := benchkit.RedisAddr(addr)
	if err != nil {
		return err
	}
	defer stop()
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -1})
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	script := redis.NewScript(loopSrc)
	ops := []string{"none", "encode", "decode_encode", "text_append", "text_start", "carry", "binary_end"}
	took := map[string][]float64{}
	for range rounds {
		for _, op := range ops {
			us, err := script.Run(ctx, c, nil, n, op).Int64()
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			took[op] = append(took[op], float64(us)/float64(n))
		}
	}
	med := func(op string) float64 {
		v := slices.Clone(took[op])
		slices.Sort(v)
		return v[len(v)/2]
	}
	base := med("none")
	fig := benchkit.NewFigures(os.Stdout)
	fig.Float("history_start_encode_us", med("encode")-base, 2, "us")
	fig.Float("history_end_decode_encode_us", med("decode_encode")-base, 2, "us")
	fig.Float("history_end_text_append_us", med("text_append")-base, 2, "us")
	fig.Float("history_end_saving_us", med("decode_encode")-med("text_append"), 2, "us")
	fig.Float("history_start_text_us", med("text_start")-base, 2, "us")
	fig.Float("history_end_carry_us", med("carry")-base, 2, "us")
	fig.Float("history_end_binary_us", med("binary_end")-base, 2, "us")
	return fig.Err()
}
