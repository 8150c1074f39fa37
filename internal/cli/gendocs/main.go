// Command gendocs writes docs/flags.md, the reference of cmd/worker's flags
// and environment variables, from the flag specs in internal/cli. Run it
// from the module root after changing a flag:
//
//	go run ./internal/cli/gendocs
//
// internal/cli's TestFlagsDoc fails while docs/flags.md is out of date.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/leasehold/leasehold/internal/cli"
)

func main() {
	out := flag.String("o", "docs/flags.md", "file to write")
	flag.Parse()
	//nolint:gosec // a document of the repository, readable by all
	if err := os.WriteFile(*out, cli.FlagsMarkdown(cli.DemoOptions(cli.DevParts{})...), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
