package scripts_test

import (
	"context"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lua"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every registered script loads into a real Redis (so it compiles) under the
// SHA that go-redis calls it by, and its text is its file, with the fence
// prelude in front for fenced scripts.
func TestScriptsLoadWithTheirSHA(t *testing.T) {
	c, _ := testkit.SharedRedis(t)
	ctx := context.Background()
	all := scripts.All()
	if len(all) == 0 {
		t.Fatal("no scripts registered")
	}
	src := sources(t)
	for name, s := range all {
		sha, err := s.Load(ctx, c).Result()
		if err != nil {
			t.Errorf("%s: SCRIPT LOAD: %v", name, err)
			continue
		}
		if sha != s.Hash() {
			t.Errorf("%s: SCRIPT LOAD answered %s, script.Hash() is %s", name, sha, s.Hash())
		}
		if ok, err := s.Exists(ctx, c).Result(); err != nil || len(ok) != 1 || !ok[0] {
			t.Errorf("%s: SCRIPT EXISTS after load = %v, %v", name, ok, err)
		}
		text, ok := src[s.Hash()]
		if !ok {
			t.Errorf("%s: its text is neither a .lua file nor the prelude followed by one", name)
			continue
		}
		if !strings.HasSuffix(text, file(t, name)) {
			t.Errorf("%s: registered with the text of another file", name)
		}
	}
}

var sourceCache map[string]string

// sources maps the SHA1 of every script text lua builds (plain files, and
// the prelude in front of each file for fenced scripts) to that text.
func sources(t *testing.T) map[string]string {
	t.Helper()
	if sourceCache != nil {
		return sourceCache
	}
	var preludes []string
	for _, f := range scripts.Files() {
		if strings.HasSuffix(f, "_prelude.lua") {
			preludes = append(preludes, file(t, f))
		}
	}
	out := map[string]string{}
	for _, f := range scripts.Files() {
		src := file(t, f)
		out[sha1Hex(src)] = src
		for _, p := range preludes {
			text := p + "\n" + src
			out[sha1Hex(text)] = text
		}
	}
	sourceCache = out
	return out
}

func file(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(lua.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every embedded .lua file is registered by some area's Go file (a prelude
// is part of other scripts: the fence prelude of every fenced script), and
// every registered name is a file.
func TestEveryFileRegistered(t *testing.T) {
	var files, registered []string
	for _, f := range scripts.Files() {
		if !strings.HasSuffix(f, "_prelude.lua") {
			files = append(files, f)
		}
	}
	for name := range scripts.All() {
		registered = append(registered, name)
	}
	sort.Strings(registered)
	if diff := cmp.Diff(files, registered); diff != "" {
		t.Fatalf("embedded files (-) vs registered scripts (+):\n%s", diff)
	}
}

// Every script starts with a comment block naming its KEYS and its return
// values (and its ARGV when it takes any).
func TestScriptHeaders(t *testing.T) {
	for _, f := range scripts.Files() {
		src := file(t, f)
		var header []string
		for _, line := range strings.Split(src, "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header = append(header, line)
		}
		h := strings.Join(header, "\n")
		if len(header) == 0 || !strings.Contains(h, "KEYS") || !strings.Contains(strings.ToLower(h), "return") {
			t.Errorf("%s: the header comment must name KEYS and the return values:\n%s", f, h)
		}
		body := strings.Join(strings.Split(src, "\n")[len(header):], "\n")
		if strings.Contains(body, "ARGV") && !strings.Contains(h, "ARGV") {
			t.Errorf("%s: uses ARGV but its header does not name it", f)
		}
	}
}
