package cli

import (
	"errors"
	"maps"
	"testing"
)

func TestParseTypeLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want map[string]int // nil: a usage error
	}{
		{"", map[string]int{}},
		{"demo.sleep=2", map[string]int{"demo.sleep": 2}},
		{" a=1 , b = 30 ,", map[string]int{"a": 1, "b": 30}},
		{"a", nil},
		{"=3", nil},
		{"a=0", nil},
		{"a=-1", nil},
		{"a=x", nil},
		{"a=1000001", nil},
		{"a=1,a=2", nil},
	} {
		got, err := parseTypeLimits(tc.in)
		var ue *usageError
		switch {
		case tc.want == nil && !errors.As(err, &ue):
			t.Errorf("parseTypeLimits(%q) = %v, %v; want a usage error", tc.in, got, err)
		case tc.want != nil && (err != nil || !maps.Equal(got, tc.want)):
			t.Errorf("parseTypeLimits(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
