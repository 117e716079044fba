package gen

import (
	"bytes"
	"go/format"
	"go/parser"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/gen/internal/gentest"
)

// goldenPkgs are the packages under testdata/src whose generated files are
// committed next to them: the golden files, compiled by TestGoldenCompiles.
var goldenPkgs = []string{"kv", "grid", "clash", "ring", "prefix", "replay", "hybrid"}

// load loads the golden package testdata/src/name.
func load(t *testing.T, name string) *Package {
	t.Helper()
	return gentest.LoadOne(t, Load, "./testdata", name)
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	gentest.Golden(t, path, got)
}

// clashesIn adds the file mine.go, of source mine, to p and returns the
// clashes Clashes finds in it, as "position: message".
func clashesIn(t *testing.T, p *Package, mine string) []string {
	t.Helper()
	f, err := parser.ParseFile(p.Fset, "mine.go", mine, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.files = append(p.files, f)
	var got []string
	for _, c := range p.Clashes() {
		if pos := p.Fset.Position(c.Pos); pos.Filename == "mine.go" {
			got = append(got, pos.String()+": "+c.Message)
		}
	}
	return got
}

func TestGolden(t *testing.T) {
	for _, name := range goldenPkgs {
		t.Run(name, func(t *testing.T) {
			p := load(t, name)
			if len(p.Contracts.Diagnostics) > 0 {
				for _, d := range p.Contracts.Diagnostics {
					t.Errorf("%s: %s", p.Fset.Position(d.Pos), d.Message)
				}
				t.Fatal("golden package has contract diagnostics")
			}
			files, err := p.Generate()
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(p.Contracts.Contracts)+len(p.Contracts.Groups) {
				t.Fatalf("generated %d files for %d contracts and %d groups", len(files), len(p.Contracts.Contracts), len(p.Contracts.Groups))
			}
			again, err := p.Generate()
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range files {
				if !bytes.HasPrefix(f.Content, []byte(Header+"\n")) {
					t.Errorf("%s does not start with %q", f.Name, Header)
				}
				if src, err := format.Source(f.Content); err != nil {
					t.Errorf("%s: %v", f.Name, err)
				} else if !bytes.Equal(src, f.Content) {
					t.Errorf("%s is not gofmt'd", f.Name)
				}
				if !bytes.Equal(f.Content, again[i].Content) {
					t.Errorf("%s differs from one run to the next", f.Name)
				}
				golden(t, filepath.Join("testdata", "src", name, f.Name), f.Content)
			}
		})
	}
}

// TestGoldenCompiles type-checks the golden packages with their generated
// files, and vets them.
func TestGoldenCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	args := []string{"vet"}
	for _, name := range goldenPkgs {
		args = append(args, "./testdata/src/"+name)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAPIFollowsContract checks that what is generated is exactly what the
// contract allows.
func TestAPIFollowsContract(t *testing.T) {
	has := func(src []byte, decl string) bool {
		// Prose is wrapped: compare it with the comment lines joined.
		flat := bytes.ReplaceAll(src, []byte("\n// "), []byte(" "))
		return bytes.Contains(src, []byte(decl)) || bytes.Contains(flat, []byte(decl))
	}
	kv := load(t, "kv")
	files, err := kv.Generate()
	if err != nil {
		t.Fatal(err)
	}
	byType := make(map[string][]byte)
	for _, f := range files {
		byType[f.Type] = f.Content
	}
	grid := load(t, "grid")
	gfiles, err := grid.Generate()
	if err != nil {
		t.Fatal(err)
	}
	byType["Field"] = gfiles[0].Content

	tests := []struct {
		typ  string
		decl string
		want bool
	}{
		{"KVCache", "func (s *KVCacheState) Append(rows KVCache) error", true},
		{"KVCache", "func (s *KVCacheState) Write(", false},
		{"KVCache", "func (s *KVCacheState) Merge(child *KVCacheState) error", true},
		{"KVCache", "func (s *KVCacheState) Rollback(to *KVCacheSnapshot) error", true},
		{"KVCache", "func (s *KVCacheState) At(v state.Version) (*KVCacheSnapshot, error)", true},
		{"KVCache", "func (s *KVCacheState) Plan(v state.Version) (state.Plan, error)", true},
		{"KVCache", "Append returns state.ErrBound once the state holds 4096 rows", true},
		{"KVCache", "//state:appends\nfunc (s *KVCacheState) Append(", true},
		{"KVCache", "//state:acquire\nfunc NewKVCacheState(", true},
		{"KVCache", "//state:acquire\nfunc (s *KVCacheState) Snapshot(", true},
		{"KVCache", "//state:acquire\nfunc (s *KVCacheState) Branch(", true},
		{"KVCache", "//state:mutates\nfunc (s *KVCacheState) Merge(", true},
		{"KVCache", "//state:view\nfunc (v *KVCacheSnapshot) Spans(", true},
		{"KVCache", "//state:release\nfunc (v *KVCacheSnapshot) Release(", true},
		{"KVCache", "//state:snapshot\ntype KVCacheSnapshot struct", true},
		{"KVCache", "At []time.Duration", false}, // the batch is the user's own type
		{"KVCache", "make([]time.Duration, n)", true},
		{"KVCache", "make([][2]int32, n)", true},
		{"KVCache", "make([]Half, n*128)", true},
		{"Log", "func (s *LogState) Branch() (*LogState, error)", true},
		{"Log", "func (s *LogState) Merge(", false},
		{"Log", "func (s *LogState) At(", false},
		{"Log", "state.ErrBound", false},
		{"Log", "Descendants: stateimpl.Keep", true},
		{"Field", "func (s *FieldState) Write(at int, rows Field) error", true},
		{"Field", "func (s *FieldState) WriteDevice(from, to int) (FieldSpans, error)", true},
		{"Field", "func (s *FieldState) Append(", false},
		{"Field", "func (s *FieldState) AppendDevice(", false},
		{"Field", "func (s *FieldState) Snapshot(", false},
		{"Field", "FieldSnapshot", false},
		{"Field", "func (s *FieldState) Branch(", false},
		{"Field", "func (s *FieldState) Rollback(", false},
		{"Field", "Bound:       4096,", true},
		{"Field", "Growth:      stateimpl.Mutable,", true},
	}
	for _, tt := range tests {
		if got := has(byType[tt.typ], tt.decl); got != tt.want {
			t.Errorf("%s: contains %q = %v, want %v", tt.typ, tt.decl, got, tt.want)
		}
	}
}

// TestDiagnosticsStopGeneration checks that a package whose contracts have
// mistakes generates nothing.
func TestDiagnosticsStopGeneration(t *testing.T) {
	p := load(t, "bad")
	if len(p.Contracts.Diagnostics) == 0 {
		t.Fatal("no diagnostics for testdata/src/bad")
	}
	files, err := p.Generate()
	if err == nil || files != nil {
		t.Fatalf("Generate = %d files, %v; want an error and no files", len(files), err)
	}
}

func TestBytes(t *testing.T) {
	for in, want := range map[int64][2]string{
		1:        {"1 B", "1 byte"},
		512:      {"512 B", "512 bytes"},
		1023:     {"1023 B", "1023 bytes"},
		1024:     {"1 KiB", "1024 bytes (1 KiB)"},
		4096:     {"4 KiB", "4096 bytes (4 KiB)"},
		1536:     {"1.5 KiB", "1536 bytes (1.5 KiB)"},
		16 << 20: {"16 MiB", "16777216 bytes (16 MiB)"},
	} {
		if got := Bytes(in); got != want[0] {
			t.Errorf("Bytes(%d) = %q, want %q", in, got, want[0])
		}
		if got := BytesExact(in); got != want[1] {
			t.Errorf("BytesExact(%d) = %q, want %q", in, got, want[1])
		}
	}
}
