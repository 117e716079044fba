package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// modulePath is the module the new module depends on, replaced by this
// checkout.
const modulePath = "github.com/gpustate/gpustate"

// TestFirstHour builds, in a new module outside the repository, the program
// of the README's first example and the code of docs/GUIDE.md, with the
// README's own commands: tool directives (go get -tool), go generate through
// go tool stategen, go tool statevet, go vet -vettool, go run. The README's
// shell lines run as written, the checkout's setup with GPUSTATE set to this
// checkout, and nothing else runs before them; the published setup must be
// the checkout's without its GPUSTATE lines. Every command but the last must
// succeed silently, and the last must print the README's output block. Then
// the README's first finding must appear under both commands that run
// statevet once main.go loses its deferred release, testdata/guide_test.go
// checks that the guide's functions do what the guide says, and the guide's
// example of a leak must be reported by statevet under both drivers.
//
// The checkout is a fresh clone: the files git tracks (and those it would
// track, not ignored), copied into a directory of their own, so nothing
// built or ignored in this one is there. The first module proxy answers
// 403 for this module's paths, as some proxies answer for a path not
// published: the checkout's setup must ask it nothing about them. It needs
// the go command and sh (and git, for the clone; without it, the checkout
// itself). Modules come from the module cache, which building this
// repository has filled, or from the caller's GOPROXY; the README's setup
// copies the checkout's go.sum for the modules the checkout needs.
func TestFirstHour(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH to run the README's commands")
	}
	root := checkout(t)
	readme := markedBlocks(t, filepath.Join(root, "README.md"))
	guide := markedBlocks(t, filepath.Join(root, "docs", "GUIDE.md"))

	m := &module{dir: t.TempDir(), env: append(moduleEnv(t, goBin, forbiddingProxy(t)), "GPUSTATE="+freshClone(t, root))}
	checkoutSetup := one(t, readme, "setup", "checkout")
	samePublished(t, checkoutSetup, one(t, readme, "setup", "published"))
	m.setUp(t, checkoutSetup)
	m.writeSources(t, readme, guide)

	// The README's commands: silent success, then the program's output.
	run := commands(t, one(t, readme, "run", ""))
	want := one(t, readme, "output", "").text
	for i, line := range run {
		out, err := m.sh(line)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		if i < len(run)-1 && out != "" {
			t.Errorf("%s printed, expected silence:\n%s", line, out)
		}
		if i == len(run)-1 && out != want {
			t.Errorf("%s printed:\n%s\nthe README's output block says:\n%s", line, out, want)
		}
	}
	if out, err := m.sh("go tool stategen -check ./..."); err != nil {
		t.Errorf("stategen -check after go generate: %v\n%s", err, out)
	}
	m.firstFinding(t, run, one(t, readme, "finding", ""))

	// The guide's functions do what the guide says.
	copyFile(t, filepath.Join("testdata", "guide_test.go"), filepath.Join(m.dir, "guide_test.go"))
	if out, err := m.sh("go test -count=1 ."); err != nil {
		t.Errorf("the guide's functions: %v\n%s", err, out)
	}

	// The guide's leak, under both drivers: a finding at the leaking call.
	for _, line := range []string{
		"GOFLAGS=-tags=leak go tool statevet ./...",
		`go vet -tags=leak -vettool="$(go tool -n statevet)" ./...`,
	} {
		out, err := m.sh(line)
		if err == nil {
			t.Errorf("%s succeeded on the guide's leak, want a finding:\n%s", line, out)
		}
		if !regexp.MustCompile(`_leak\.go:\d+:\d+: \w+ acquired by \w+ is not released on every path`).MatchString(out) {
			t.Errorf("%s did not report the guide's leak:\n%s", line, out)
		}
	}
}

// A module is the new module, in a directory of its own.
type module struct {
	dir string
	env []string
}

// sh runs a shell line in the module and returns its combined output.
func (m *module) sh(line string) (string, error) {
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir, cmd.Env = m.dir, m.env
	out, err := cmd.CombinedOutput()
	return withoutDownloads(string(out)), err
}

// withoutDownloads drops the go command's "go: downloading" lines, which a
// cold module cache prints and a warm one does not: a newcomer's silence is
// the commands' own.
func withoutDownloads(out string) string {
	lines := strings.SplitAfter(out, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, "go: downloading ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// setUp runs the README's setup lines as written.
func (m *module) setUp(t *testing.T, setup block) {
	for _, line := range commands(t, setup) {
		if out, err := m.sh(line); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(m.dir, "go.mod")); err != nil {
		t.Fatalf("%s: the setup makes no go.mod", setup.pos)
	}
}

// samePublished checks that the published setup is the checkout's without
// the lines that name the checkout, so that the one the test runs stands
// for both.
func samePublished(t *testing.T, checkout, published block) {
	var want []string
	for _, line := range commands(t, checkout) {
		if !strings.Contains(line, "$GPUSTATE") {
			want = append(want, line)
		}
	}
	if got := commands(t, published); !slices.Equal(got, want) {
		t.Errorf("%s: the published setup runs\n%s\nwant the checkout's (%s) without its $GPUSTATE lines:\n%s",
			published.pos, strings.Join(got, "\n"), checkout.pos, strings.Join(want, "\n"))
	}
}

// firstFinding deletes the line "defer snap.Release()" from main.go and
// checks that every command of the README's run block that runs statevet
// fails with each line of the finding block (paths may come before them);
// then it puts main.go back.
func (m *module) firstFinding(t *testing.T, run []string, finding block) {
	path := filepath.Join(m.dir, "main.go")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer writeFile(t, path, string(orig))
	var kept []string
	for line := range strings.Lines(string(orig)) {
		if strings.TrimSpace(line) != "defer snap.Release()" {
			kept = append(kept, line)
		}
	}
	if len(kept) != strings.Count(string(orig), "\n")-1 {
		t.Fatal("main.go has no line defer snap.Release() to delete, or several")
	}
	writeFile(t, path, strings.Join(kept, ""))
	want := strings.TrimSpace(finding.text)
	n := 0
	for _, line := range run {
		if !strings.Contains(line, "statevet") {
			continue
		}
		n++
		out, err := m.sh(line)
		if err == nil {
			t.Errorf("%s succeeded without the deferred release, want the finding of %s", line, finding.pos)
		}
		for w := range strings.Lines(want) {
			if !strings.Contains(out, strings.TrimRight(w, "\n")) {
				t.Errorf("%s printed:\n%s\nwant the finding of %s:\n%s", line, out, finding.pos, want)
				break
			}
		}
	}
	if n != 2 {
		t.Errorf("the README's run block runs statevet %d times, want 2 (go tool statevet and go vet -vettool)", n)
	}
}

// writeSources writes the README's files into the module, and beside them
// the guide's declarations, its leaks under the build tag leak; it checks
// that excerpts are excerpts of the README's files.
func (m *module) writeSources(t *testing.T, readme, guide []block) {
	var program string
	for _, b := range readme {
		if b.kind == "file" {
			writeFile(t, filepath.Join(m.dir, b.name), b.text)
			program += b.text
		}
	}
	if program == "" {
		t.Fatal("README.md has no <!-- e2e:file NAME --> block")
	}
	leaks := 0
	for i, b := range append(readme, guide...) {
		switch b.kind {
		case "decls":
			writeFile(t, filepath.Join(m.dir, fmt.Sprintf("guide%d.go", i)), declFile(t, b, ""))
		case "leak":
			leaks++
			writeFile(t, filepath.Join(m.dir, fmt.Sprintf("guide%d_leak.go", i)), declFile(t, b, "leak"))
		case "excerpt":
			if !containsLines(program, b.text) {
				t.Errorf("%s: this excerpt is not in the README's program:\n%s", b.pos, b.text)
			}
		}
	}
	if leaks == 0 {
		t.Fatal("docs/GUIDE.md has no <!-- e2e:leak --> block")
	}
}

// moduleEnv is the environment of the go commands in the new module: no
// workspace, no GOFLAGS of the caller, this toolchain, the host backend.
// The module proxy is forbidding's, then the caller's proxies after a
// comma: the go command goes on to the next proxy only when one answers
// 404 or 410, so a 403 from the first stops every lookup of gpustate's
// paths, while public modules the cache lacks (a tool's test dependencies
// that go mod tidy records) still come from the caller's proxies.
func moduleEnv(t *testing.T, goBin, forbidding string) []string {
	out, err := exec.Command(goBin, "env", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env GOPROXY: %v", err)
	}
	proxies := []string{forbidding}
	for _, p := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			proxies = append(proxies, p)
		}
	}
	return append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=",
		"GOTOOLCHAIN=local",
		"GOPROXY="+strings.Join(append(proxies, "off"), ","),
		"GPUSTATE_BACKEND=host",
		"PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
}

// forbiddingProxy starts a module proxy on a loopback address that answers
// 403 Forbidden to every request for a path of this module, as some
// proxies answer for a path not published (where others answer 404, after
// which the go command tries the next proxy), and 404 to the rest, and
// returns its URL. The test fails if the go command asked it about this
// module: a 403 stops go get, and the README's setup must ask nothing.
func forbiddingProxy(t *testing.T) string {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/"+modulePath+"/") && r.URL.Path != "/"+modulePath {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(asked) > 0 {
			t.Errorf("the module proxy was asked about %s (and answered 403): %s", modulePath, strings.Join(asked, " "))
		}
	})
	return srv.URL
}

// freshClone copies into a new directory the files of the work tree at
// root that a clone of it holds: those git tracks, and those it would
// (untracked, not ignored), so that edits not yet committed are tested
// too. Without git, or outside a git work tree, it returns root.
func freshClone(t *testing.T, root string) string {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Logf("no git work tree at %s (%v): the checkout stands for its clone", root, err)
		return root
	}
	dir := filepath.Join(t.TempDir(), "gpustate")
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		from := filepath.Join(root, name)
		info, err := os.Lstat(from)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted from the work tree, or a link or submodule
		}
		to := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkout returns the root of the module this test belongs to.
func checkout(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if !strings.Contains(string(data), "module "+modulePath+"\n") {
				t.Fatalf("%s/go.mod is not module %s", dir, modulePath)
			}
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// A block is a fenced code block of a Markdown file, marked by the comment
// <!-- e2e:KIND [NAME] --> on the line before its fence.
type block struct {
	kind, name string
	lang       string
	text       string
	pos        string // file:line of the fence
}

var markerRE = regexp.MustCompile(`^<!-- e2e:(\w+)(?: (\S+))? -->$`)

// markedBlocks returns the marked blocks of a Markdown file, and fails the
// test on a Go block without a marker: every Go block of the documents is
// compiled, or checked to be an excerpt of code that is.
func markedBlocks(t *testing.T, path string) []block {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks []block
		marker []string // of the line before, if a marker
		cur    *block
		indent string // of the open block's fence, as in a list item
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		case strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(trimmed)]
			cur = &block{lang: trimmed[3:], pos: fmt.Sprintf("%s:%d", filepath.Base(path), n)}
			if marker != nil {
				cur.kind, cur.name = marker[1], marker[2]
			} else if cur.lang == "go" {
				t.Errorf("%s: a Go block without an <!-- e2e:KIND --> marker", cur.pos)
			}
		}
		marker = markerRE.FindStringSubmatch(trimmed)
	}
	if cur != nil {
		t.Fatalf("%s: unterminated code block", cur.pos)
	}
	return blocks
}

// one returns the one block of a kind (and name).
func one(t *testing.T, blocks []block, kind, name string) block {
	i := slices.IndexFunc(blocks, func(b block) bool { return b.kind == kind && b.name == name })
	if i < 0 || slices.ContainsFunc(blocks[i+1:], func(b block) bool { return b.kind == kind && b.name == name }) {
		t.Fatalf("want exactly one <!-- e2e:%s --> block", strings.TrimSpace(kind+" "+name))
	}
	return blocks[i]
}

// commands returns the shell lines of a block, without blank lines.
func commands(t *testing.T, b block) []string {
	var lines []string
	for line := range strings.Lines(b.text) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s: no commands", b.pos)
	}
	return lines
}

// imports are the packages a guide block may use without importing them.
var imports = map[string]string{
	"binary":       "encoding/binary",
	"errors":       "errors",
	"math":         "math",
	"fmt":          "fmt",
	"io":           "io",
	"device":       modulePath + "/runtime/device",
	"state":        modulePath + "/runtime/state",
	"statemetrics": modulePath + "/runtime/state/statemetrics",
	"http":         "net/http",
	"prometheus":   "github.com/prometheus/client_golang/prometheus",
	"promhttp":     "github.com/prometheus/client_golang/prometheus/promhttp",
}

// declFile makes a file of package main from a block of declarations,
// importing the packages of imports it names, under a build tag if any.
func declFile(t *testing.T, b block, tag string) string {
	f, err := parser.ParseFile(token.NewFileSet(), b.pos, "package main\n"+b.text, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: not Go declarations: %v", b.pos, err)
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" {
				used[x.Name] = true
			}
		}
		return true
	})
	var src strings.Builder
	if tag != "" {
		fmt.Fprintf(&src, "//go:build %s\n\n", tag)
	}
	fmt.Fprintf(&src, "// From %s.\n\npackage main\n\n", b.pos)
	for _, name := range slices.Sorted(maps.Keys(used)) {
		fmt.Fprintf(&src, "import %s\n", strconv.Quote(imports[name]))
	}
	return src.String() + "\n" + b.text
}

// containsLines reports whether the lines of excerpt appear one after the
// other in text, leading and trailing spaces aside.
func containsLines(text, excerpt string) bool {
	trim := func(s string) []string {
		var lines []string
		for line := range strings.Lines(s) {
			lines = append(lines, strings.TrimSpace(line))
		}
		return lines
	}
	all, want := trim(text), trim(excerpt)
	for i := 0; i+len(want) <= len(all); i++ {
		if slices.Equal(all[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

func writeFile(t *testing.T, path, text string) {
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}
