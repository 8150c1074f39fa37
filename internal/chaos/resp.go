package chaos

import (
	"bytes"
	"strconv"
)

// respValue is one RESP2 or RESP3 value, as much of it as the history needs.
type respValue struct {
	kind  byte // the RESP type byte: + - : $ * _ , # ( = % ~ >
	str   []byte
	num   int64
	elems []respValue
	null  bool
}

// parseRESP reads one value from the start of b and returns it and its length
// in bytes, errIncomplete when b ends before it does.
func parseRESP(b []byte) (respValue, int, error) {
	if len(b) == 0 {
		return respValue{}, 0, errIncomplete
	}
	end := bytes.Index(b, []byte("\r\n"))
	if end < 0 {
		return respValue{}, 0, errIncomplete
	}
	v := respValue{kind: b[0]}
	head := b[1:end]
	n := end + 2
	switch v.kind {
	case '+', '-', ',', '(':
		v.str = head
		return v, n, nil
	case '#':
		v.num = map[bool]int64{true: 1, false: 0}[string(head) == "t"]
		return v, n, nil
	case '_':
		v.null = true
		return v, n, nil
	case ':':
		i, err := strconv.ParseInt(string(head), 10, 64)
		if err != nil {
			return v, 0, errBadRESP
		}
		v.num = i
		return v, n, nil
	case '$', '=', '!':
		size, err := strconv.Atoi(string(head))
		if err != nil {
			return v, 0, errBadRESP
		}
		if size < 0 {
			v.null = true
			return v, n, nil
		}
		if len(b) < n+size+2 {
			return v, 0, errIncomplete
		}
		v.str = b[n : n+size]
		return v, n + size + 2, nil
	case '*', '~', '>', '%', '|':
		count, err := strconv.Atoi(string(head))
		if err != nil {
			return v, 0, errBadRESP
		}
		if count < 0 {
			v.null = true
			return v, n, nil
		}
		if v.kind == '%' || v.kind == '|' {
			count *= 2
		}
		v.elems = make([]respValue, 0, count)
		for range count {
			e, m, err := parseRESP(b[n:])
			if err != nil {
				return v, 0, err
			}
			v.elems = append(v.elems, e)
			n += m
		}
		return v, n, nil
	}
	return v, 0, errBadRESP
}

// isError reports whether v is an error reply.
func (v respValue) isError() bool { return v.kind == '-' || v.kind == '!' }

// int returns v as an integer (a RESP integer, or a number in a string).
func (v respValue) int() (int64, bool) {
	switch v.kind {
	case ':':
		return v.num, true
	case '$', '+':
		i, err := strconv.ParseInt(string(v.str), 10, 64)
		return i, err == nil
	}
	return 0, false
}

// args returns a request's arguments (an array of bulk strings) as strings.
func (v respValue) args() []string {
	if v.kind != '*' {
		return nil
	}
	out := make([]string, len(v.elems))
	for i, e := range v.elems {
		out[i] = string(e.str)
	}
	return out
}
