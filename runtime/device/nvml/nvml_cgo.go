//go:build cgo && linux

package nvml

import (
	"fmt"
	"os"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The process-wide NVML library: loaded once, initialized once per open
// Monitor (NVML counts its inits), and never touched again after a failed
// nvmlInit.
var lib struct {
	sync.Mutex
	iface gonvml.Interface
	path  string
	err   error // the failed init, sticky
}

// Monitor reads one device's memory through NVML. It is safe for
// concurrent use.
type Monitor struct {
	mu     sync.Mutex
	dev    gonvml.Device
	pid    uint32
	closed bool
}

// Open initializes NVML and finds the device opt names. Every failure to
// load or initialize the library wraps ErrUnavailable.
func Open(opt Options) (*Monitor, error) {
	path := opt.Library
	if path == "" {
		path = os.Getenv(EnvLibNVML)
	}
	if path == "" {
		path = "libnvidia-ml.so.1"
	}
	lib.Lock()
	defer lib.Unlock()
	if lib.err != nil {
		return nil, lib.err
	}
	if lib.iface == nil {
		lib.iface = gonvml.New(gonvml.WithLibraryPath(path))
		lib.path = path
	} else if path != lib.path {
		return nil, fmt.Errorf("nvml: %s requested, but this process uses %s", path, lib.path)
	}
	if r := lib.iface.Init(); r != gonvml.SUCCESS {
		// Nothing else in NVML may run now, not even nvmlErrorString.
		lib.err = fmt.Errorf("nvml: init %s: %s: %w", path, errorName(r), ErrUnavailable)
		return nil, lib.err
	}
	var dev gonvml.Device
	var r gonvml.Return
	if opt.UUID != "" {
		dev, r = lib.iface.DeviceGetHandleByUUID(opt.UUID)
	} else {
		dev, r = lib.iface.DeviceGetHandleByIndex(0)
	}
	if r != gonvml.SUCCESS {
		lib.iface.Shutdown()
		which := "device 0"
		if opt.UUID != "" {
			which = "device " + opt.UUID
		}
		return nil, fmt.Errorf("nvml: %s: %s", which, errorName(r))
	}
	return &Monitor{dev: dev, pid: uint32(os.Getpid())}, nil
}

// Memory reads the device's memory figures.
func (m *Monitor) Memory() (Memory, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Memory{}, ErrClosed
	}
	info, r := m.dev.GetMemoryInfo()
	if r != gonvml.SUCCESS {
		return Memory{}, fmt.Errorf("nvml: memory info: %s", errorName(r))
	}
	procs, r := m.dev.GetComputeRunningProcesses()
	if r != gonvml.SUCCESS {
		return Memory{}, fmt.Errorf("nvml: compute processes: %s", errorName(r))
	}
	mem := Memory{Total: info.Total, Used: info.Used, Free: info.Free}
	for _, p := range procs {
		if p.Pid == m.pid {
			mem.Process += p.UsedGpuMemory
		}
	}
	return mem, nil
}

// Close gives back the Monitor's share of NVML; later calls, Close
// included, fail with ErrClosed.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	lib.Lock()
	defer lib.Unlock()
	if r := lib.iface.Shutdown(); r != gonvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %s", errorName(r))
	}
	return nil
}

// errorName names an NVML result without calling into NVML (whose
// nvmlErrorString must not run after a failed init).
func errorName(r gonvml.Return) string {
	name, ok := returnNames[r]
	if !ok {
		name = "NVML_ERROR"
	}
	return fmt.Sprintf("%s (%d)", name, int32(r))
}

var returnNames = map[gonvml.Return]string{
	gonvml.SUCCESS:                       "NVML_SUCCESS",
	gonvml.ERROR_UNINITIALIZED:           "NVML_ERROR_UNINITIALIZED",
	gonvml.ERROR_INVALID_ARGUMENT:        "NVML_ERROR_INVALID_ARGUMENT",
	gonvml.ERROR_NOT_SUPPORTED:           "NVML_ERROR_NOT_SUPPORTED",
	gonvml.ERROR_NO_PERMISSION:           "NVML_ERROR_NO_PERMISSION",
	gonvml.ERROR_NOT_FOUND:               "NVML_ERROR_NOT_FOUND",
	gonvml.ERROR_INSUFFICIENT_SIZE:       "NVML_ERROR_INSUFFICIENT_SIZE",
	gonvml.ERROR_DRIVER_NOT_LOADED:       "NVML_ERROR_DRIVER_NOT_LOADED",
	gonvml.ERROR_LIBRARY_NOT_FOUND:       "NVML_ERROR_LIBRARY_NOT_FOUND",
	gonvml.ERROR_FUNCTION_NOT_FOUND:      "NVML_ERROR_FUNCTION_NOT_FOUND",
	gonvml.ERROR_GPU_IS_LOST:             "NVML_ERROR_GPU_IS_LOST",
	gonvml.ERROR_LIB_RM_VERSION_MISMATCH: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
	gonvml.ERROR_UNKNOWN:                 "NVML_ERROR_UNKNOWN",
}
