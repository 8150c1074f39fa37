package leasehold

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestRootFunctionsShort keeps the root package readable: no function over
// 60 lines (the hot path reads top to bottom).
func TestRootFunctionsShort(t *testing.T) {
	t.Parallel()
	long := longFunctions(t, ".", 60)
	if len(long) > 0 {
		t.Errorf("functions over 60 lines; split them:\n%s", strings.Join(long, "\n"))
	}
}

// longFunctions lists the functions of the package in dir (tests aside)
// longer than max lines.
func longFunctions(t *testing.T, dir string, max int) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	must(t, err)
	var long []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		must(t, err)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > max {
				long = append(long, fmt.Sprintf("%s: %s is %d lines", name, fd.Name.Name, n))
			}
		}
	}
	return long
}
