package chaos

import (
	"errors"
	"testing"
)

// TestParseRESP reads RESP2 and RESP3 values whole, and reports a value cut
// anywhere as incomplete rather than as something else.
func TestParseRESP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		kind byte
		n    int // elements
	}{
		{"+OK\r\n", '+', 0},
		{"-NOSCRIPT No matching script\r\n", '-', 0},
		{":-1\r\n", ':', 0},
		{"$5\r\nhello\r\n", '$', 0},
		{"$-1\r\n", '$', 0},
		{"_\r\n", '_', 0},
		{"#t\r\n", '#', 0},
		{",3.14\r\n", ',', 0},
		{"*2\r\n*3\r\n:1\r\n:17\r\n$0\r\n\r\n:-3\r\n", '*', 2},
		{"%1\r\n+server\r\n+redis\r\n", '%', 2},
		{">2\r\n+message\r\n+x\r\n", '>', 2},
		{"~1\r\n:5\r\n", '~', 1},
	} {
		v, n, err := parseRESP([]byte(tc.in + "+next\r\n"))
		if err != nil || n != len(tc.in) || v.kind != tc.kind || len(v.elems) != tc.n {
			t.Errorf("%q: kind %q, %d elements, %d bytes, %v; want %q, %d, %d", tc.in, v.kind, len(v.elems), n, err,
				tc.kind, tc.n, len(tc.in))
		}
		for cut := range len(tc.in) {
			if _, _, err := parseRESP([]byte(tc.in[:cut])); !errors.Is(err, errIncomplete) {
				t.Errorf("%q cut at %d: %v, want errIncomplete", tc.in, cut, err)
			}
		}
	}
	if _, _, err := parseRESP([]byte("?what\r\n")); !errors.Is(err, errBadRESP) {
		t.Errorf("unknown type: %v, want errBadRESP", err)
	}
	v, _, _ := parseRESP([]byte("*2\r\n:7\r\n$2\r\n42\r\n"))
	if a, _ := v.elems[0].int(); a != 7 {
		t.Errorf("integer %d, want 7", a)
	}
	if b, _ := v.elems[1].int(); b != 42 {
		t.Errorf("number in a bulk string %d, want 42", b)
	}
}
