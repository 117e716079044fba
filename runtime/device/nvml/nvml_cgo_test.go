//go:build cgo && linux

package nvml

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
	"github.com/gpustate/gpustate/runtime/device"
)

// The NVML library binds once per process, and a failed init must end all
// use of it, so each scenario runs in a child process: the test binary run
// again with NVMLTEST_SCENARIO set.
const envScenario = "NVMLTEST_SCENARIO"

const fakeUUID = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"

func TestMain(m *testing.M) {
	code := m.Run()
	fakecuda.Cleanup() // the fake CUDA driver TestScenarios built
	os.Exit(code)
}

func TestScenarios(t *testing.T) {
	if os.Getenv(envScenario) != "" {
		t.Skip("in a scenario's child process")
	}
	dir := t.TempDir()
	nvmlLib := filepath.Join(dir, "libnvidia-ml.so.1")
	fakecuda.Compile(t, filepath.Join("testdata", "fakenvml.c"), nvmlLib)
	cudaLib := fakecuda.Build(t)
	for _, sc := range []struct {
		name string
		env  []string
	}{
		{"missing", []string{EnvLibNVML + "=" + filepath.Join(dir, "absent.so")}},
		{"initfail", []string{EnvLibNVML + "=" + nvmlLib, "FAKENVML_INIT=9"}},
		{"memory", []string{EnvLibNVML + "=" + nvmlLib, "FAKENVML_TOTAL=1000000", "FAKENVML_USED=250000", "FAKENVML_PROC=4096", "FAKENVML_OTHERS=5"}},
		{"backend", []string{EnvLibNVML + "=" + nvmlLib, device.EnvLibCUDA + "=" + cudaLib}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestScenario$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), append(sc.env, envScenario+"="+sc.name)...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestScenario") {
				t.Fatalf("scenario %s: %v\n%s", sc.name, err, out)
			}
		})
	}
}

// TestScenario is one scenario, run only in a child process.
func TestScenario(t *testing.T) {
	switch os.Getenv(envScenario) {
	case "":
		t.Skip("run by TestScenarios in a child process")
	case "missing":
		_, err := Open(Options{})
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "NVML_ERROR_LIBRARY_NOT_FOUND") {
			t.Fatalf("Open without the library: got %v", err)
		}
		if _, err2 := Open(Options{UUID: fakeUUID}); !errors.Is(err2, ErrUnavailable) {
			t.Fatalf("second Open without the library: got %v", err2)
		}
	case "initfail":
		// The fake aborts the process if anything but nvmlInit is called
		// after nvmlInit failed.
		_, err := Open(Options{UUID: fakeUUID})
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "NVML_ERROR_DRIVER_NOT_LOADED") {
			t.Fatalf("Open with a failing init: got %v", err)
		}
		os.Setenv("FAKENVML_INIT", "0")
		if _, err2 := Open(Options{UUID: fakeUUID}); err2 != err {
			t.Fatalf("Open after a failed init: got %v, want the same error %v", err2, err)
		}
	case "memory":
		m, err := Open(Options{UUID: fakeUUID})
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Memory()
		want := Memory{Total: 1000000, Used: 250000, Free: 750000, Process: 4096}
		if err != nil || got != want {
			t.Fatalf("Memory() = %+v, %v; want %+v", got, err, want)
		}
		os.Setenv("FAKENVML_PROC", "0")
		if got, err := m.Memory(); err != nil || got.Process != 0 {
			t.Fatalf("Memory() with this process unlisted = %+v, %v", got, err)
		}
		m0, err := Open(Options{})
		if err != nil {
			t.Fatalf("Open of device 0: %v", err)
		}
		if got, err := m0.Memory(); err != nil || got.Total != 1000000 {
			t.Fatalf("device 0: Memory() = %+v, %v", got, err)
		}
		if _, err := Open(Options{UUID: "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"}); err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "NVML_ERROR_NOT_FOUND") {
			t.Fatalf("Open of an unknown UUID: got %v", err)
		}
		if _, err := Open(Options{Library: "/elsewhere/libnvidia-ml.so.1"}); err == nil {
			t.Fatal("Open of a second library succeeded")
		}
		for _, mon := range []*Monitor{m, m0} {
			if err := mon.Close(); err != nil {
				t.Fatal(err)
			}
			if err := mon.Close(); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := mon.Memory(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Memory after Close: %v", err)
			}
		}
		// All shut down: the fake aborts if NVML is used now; a new Open
		// initializes it again.
		m, err = Open(Options{UUID: fakeUUID})
		if err != nil {
			t.Fatalf("Open after every Monitor closed: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	case "backend":
		if _, err := ForBackend(device.Host()); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("ForBackend(host): got %v", err)
		}
		c, err := device.OpenCUDA(device.CUDAOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m, err := ForBackend(c)
		if err != nil {
			t.Fatalf("ForBackend(cuda): %v", err)
		}
		defer m.Close()
		if got, err := m.Memory(); err != nil || got.Total != 80<<30 {
			t.Fatalf("Memory() = %+v, %v", got, err)
		}
	default:
		t.Fatalf("unknown scenario %q", os.Getenv(envScenario))
	}
}

// TestReal reads the machine's GPU through NVML; make gpu-check runs it with
// GPUSTATE_BACKEND=cuda.
func TestReal(t *testing.T) {
	if os.Getenv(envScenario) != "" || os.Getenv(device.EnvBackend) != "cuda" {
		t.Skip("GPUSTATE_BACKEND is not cuda: the real NVML is tested by make gpu-check")
	}
	c, err := device.OpenCUDA(device.CUDAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 256 << 20
	if _, err := c.Alloc(size); err != nil {
		t.Fatal(err)
	}
	m, err := ForBackend(c)
	if err != nil {
		t.Fatalf("ForBackend(%s): %v", c.DeviceName(), err)
	}
	defer m.Close()
	mem, err := m.Memory()
	if err != nil {
		t.Fatal(err)
	}
	free, total, err := c.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: NVML total %d used %d free %d, this process %d; driver total %d free %d",
		c.DeviceName(), mem.Total, mem.Used, mem.Free, mem.Process, total, free)
	if mem.Total == 0 || mem.Used < size || mem.Free > mem.Total {
		t.Errorf("NVML figures do not hold a %d-byte allocation: %+v", size, mem)
	}
	if mem.Process == 0 {
		t.Log("NVML does not list this process (a pid namespace hides it, or the driver reports no per-process usage)")
	} else if mem.Process < size {
		t.Errorf("NVML gives this process %d bytes, less than its %d-byte allocation", mem.Process, size)
	}
}
