//go:build linux

package device

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
)

// fake is a built variant of testdata/fakecuda.c, loaded for control.
type fake struct {
	path string
	set  func(key string, value int64) int32
	get  func(key string) int64
	// setCurrent is the fake's cuCtxSetCurrent, for tests that change the
	// calling thread's context behind the backend's back.
	setCurrent func(ctx uintptr) int32
}

var fakes struct {
	sync.Mutex
	dir   string
	built map[string]*fake
}

// fakeDriver builds the fake driver library with the given preprocessor
// defines (once per set of defines) and returns it, reset to one device
// with 1 GiB of memory and no injected failures.
func fakeDriver(t testing.TB, defines ...string) *fake {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: cannot build the fake CUDA driver the CUDA backend's tests run against")
	}
	key := strings.Join(defines, " ")
	fakes.Lock()
	defer fakes.Unlock()
	f := fakes.built[key]
	if f == nil {
		if fakes.dir == "" {
			dir, err := os.MkdirTemp("", "fakecuda")
			if err != nil {
				t.Fatal(err)
			}
			fakes.dir = dir
			fakes.built = map[string]*fake{}
		}
		src, err := filepath.Abs(filepath.Join("testdata", "fakecuda.c"))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(fakes.dir, "v"+strings.NewReplacer("-D", "", " ", "_").Replace(key))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f = &fake{path: filepath.Join(dir, "libcuda.so.1")}
		args := append([]string{"-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", f.path, src}, defines...)
		args = append(args, "-lpthread")
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("building the fake CUDA driver: %v\n%s", err, out)
		}
		h, err := purego.Dlopen(f.path, purego.RTLD_LAZY|purego.RTLD_LOCAL)
		if err != nil {
			t.Fatalf("loading the fake CUDA driver: %v", err)
		}
		purego.RegisterLibFunc(&f.set, h, "fakecuda_set")
		purego.RegisterLibFunc(&f.get, h, "fakecuda_get")
		purego.RegisterLibFunc(&f.setCurrent, h, "cuCtxSetCurrent")
		fakes.built[key] = f
	}
	f.must(t, "reset", 0)
	return f
}

// must sets a control of the fake.
func (f *fake) must(t testing.TB, key string, value int64) {
	t.Helper()
	if f.set(key, value) != 1 {
		t.Fatalf("fake CUDA driver: unknown control %q", key)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakes.dir != "" {
		os.RemoveAll(fakes.dir)
	}
	os.Exit(code)
}
