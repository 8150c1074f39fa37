package tracing_test

import (
	"os"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/tracing"
)

// The README's metrics table lists every metric in the catalog.
func TestREADMEMetricsTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start, end := strings.Index(s, "<!-- section:tracing -->"), strings.Index(s, "<!-- /section:tracing -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no tracing section")
	}
	section := s[start:end]
	for _, m := range tracing.Catalog() {
		if !strings.Contains(section, "| `"+m.Prometheus+"` |") {
			t.Errorf("README metrics table lacks %s", m.Prometheus)
		}
	}
}
