package tracing_test

import (
	"os"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/tracing"
)

// The metrics table in docs/observability.md lists every metric in the catalog.
func TestREADMEMetricsTable(t *testing.T) {
	b, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start, end := strings.Index(s, "<!-- section:tracing -->"), strings.Index(s, "<!-- /section:tracing -->")
	if start < 0 || end < start {
		t.Fatal("docs/observability.md has no tracing section")
	}
	section := s[start:end]
	for _, m := range tracing.Catalog() {
		if !strings.Contains(section, "| `"+m.Prometheus+"` |") {
			t.Errorf("docs/observability.md metrics table lacks %s", m.Prometheus)
		}
	}
}
