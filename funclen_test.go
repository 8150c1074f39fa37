package leasehold

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines is the longest a production function may be: a function
// reads top to bottom on one screen.
const maxFuncLines = 60

// funcLenExempt are the directories the guard does not read, and why.
var funcLenExempt = map[string]string{
	"bench":    "benchmark programs: each main sets up, measures and prints in order, read as a script",
	"examples": "examples are read top to bottom as a walkthrough of one use",
	".git":     "",
	"testdata": "",
}

// longFuncDebt lists the functions over maxFuncLines that predate the guard
// reaching their package, with their length then. They may shrink, never
// grow; one split below the limit must leave the list (the test says so),
// and no function may join it.
var longFuncDebt = map[string]int{
	"compensation/runner.go compensate":         82,
	"compensation/runner.go step":               80,
	"idempotency/capacity.go Capacity":          68,
	"idempotency/finish.go finish":              110,
	"idempotency/lookup.go lookup":              96,
	"internal/chaos/config.go Finish":           85,
	"internal/chaos/resp.go parseRESP":          67,
	"internal/chaos/run.go run":                 118,
	"internal/chaos/verdict.go judgePartitions": 63,
	"internal/cli/demo.go runDemo":              192,
	"internal/cli/dlqcmd.go cmdDLQ":             65,
	"internal/cli/run.go runWorker":             133,
	"internal/cli/ui.go cmdUI":                  88,
	"tracing/otelsetup/setup.go Setup":          79,
}

// TestFunctionsShort keeps every production package of the module readable:
// no function over maxFuncLines lines, except the listed debt.
func TestFunctionsShort(t *testing.T) {
	t.Parallel()
	lengths := moduleFuncLengths(t)
	var long, grown, repaid []string
	for name, n := range lengths {
		debt, listed := longFuncDebt[name]
		switch {
		case n > maxFuncLines && !listed:
			long = append(long, fmt.Sprintf("%s is %d lines", name, n))
		case listed && n > debt:
			grown = append(grown, fmt.Sprintf("%s grew from %d to %d lines", name, debt, n))
		}
	}
	for name := range longFuncDebt {
		if n, ok := lengths[name]; !ok || n <= maxFuncLines {
			repaid = append(repaid, name)
		}
	}
	for _, l := range [][]string{long, grown, repaid} {
		sort.Strings(l)
	}
	if len(long) > 0 {
		t.Errorf("functions over %d lines; split them:\n%s", maxFuncLines, strings.Join(long, "\n"))
	}
	if len(grown) > 0 {
		t.Errorf("listed long functions grew; split them:\n%s", strings.Join(grown, "\n"))
	}
	if len(repaid) > 0 {
		t.Errorf("now short or gone; remove them from longFuncDebt:\n%s", strings.Join(repaid, "\n"))
	}
}

// moduleFuncLengths returns the length in lines of every function with a
// body in the module's non-test Go files, by "dir/file.go name" (methods by
// their name alone), outside funcLenExempt and other modules.
func moduleFuncLengths(t *testing.T) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if _, skip := funcLenExempt[d.Name()]; skip && path != "." {
				return filepath.SkipDir
			}
			if path != "." && fileExists(filepath.Join(path, "go.mod")) {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				name := filepath.ToSlash(path) + " " + fd.Name.Name // methods by their name alone
				out[name] = max(out[name], n)
			}
		}
		return nil
	})
	must(t, err)
	return out
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
