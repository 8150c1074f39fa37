package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteTableRewritesOnlyItsSection(t *testing.T) {
	file := filepath.Join(t.TempDir(), "doc.md")
	before, after := "# Title\n\ntext before\n\n", "\n\ntext after\n"
	if err := os.WriteFile(file, []byte(before+tableBegin+"\nold figures\n"+tableEnd+after), 0o600); err != nil {
		t.Fatal(err)
	}
	var f figures
	for _, v := range []float64{30000, 10000, 20000} {
		f.add("leasehold_jobs_per_s", v, 0, "jobs/s")
	}
	f.add("asynq_jobs_per_s", 5000, 0, "jobs/s")
	f.add("leasehold_vs_asynq", 4, 1, "x")
	for range 2 { // twice: the second run rewrites the first one's section
		if err := writeTable(file, &f, conditions{loadStart: 1, loadEnd: 2}, []string{"-table=x.md", "-rounds", "3"}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{"| 20000 |", "| 5000 |", "4.0x", "`make compare ARGS='-rounds 3'`", "medians of 3 rounds"} {
		if !strings.Contains(doc, want) {
			t.Errorf("table lacks %q:\n%s", want, doc)
		}
	}
	if !strings.HasPrefix(doc, before+tableBegin) || !strings.HasSuffix(doc, tableEnd+after) ||
		strings.Contains(doc, "old figures") || strings.Count(doc, tableBegin) != 1 {
		t.Errorf("section not replaced in place:\n%s", doc)
	}
}
