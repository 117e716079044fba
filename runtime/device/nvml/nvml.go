// Package nvml reports a GPU's memory as the NVIDIA Management Library
// (NVML) sees it: the device's total, used and free bytes and the bytes this
// process holds on it. The state store shows these figures next to its own
// accounting, as evidence from outside it.
//
// NVML is reached through github.com/NVIDIA/go-nvml, which needs cgo; the
// library itself, libnvidia-ml.so.1, is loaded at run time, so building
// needs neither it nor a GPU. Built without cgo or off Linux, Open always
// fails with ErrUnavailable. The go-nvml bindings are linked with lazily
// resolved symbols: programs that import this package must not be linked
// with -z now (-Wl,-z,now), or they fail to start on machines without NVML.
//
// When nvmlInit fails, nothing else in NVML is called again in the process:
// the failure is remembered and every later Open returns it.
//
// GPUSTATE_LIBNVML names the library to load instead of libnvidia-ml.so.1.
package nvml

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
)

// EnvLibNVML is the environment variable naming the NVML library to load
// instead of libnvidia-ml.so.1.
const EnvLibNVML = "GPUSTATE_LIBNVML"

// ErrUnavailable is returned, wrapped, when NVML cannot be used: the
// package was built without cgo, the library does not load, or it fails to
// initialize.
var ErrUnavailable = errors.New("nvml: unavailable")

// ErrClosed is returned by a Monitor's methods after its Close.
var ErrClosed = errors.New("nvml: monitor closed")

// Memory is one reading of a device's memory, in bytes.
type Memory struct {
	Total, Used, Free uint64
	// Process sums the memory NVML attributes to this process's compute
	// contexts on the device. It is 0 while the process has no context
	// there, and where NVML cannot see this process's pid (from inside a
	// container's pid namespace, for one).
	Process uint64
}

// Options selects the library and the device to watch.
type Options struct {
	// Library is the path of the NVML library. Empty means
	// $GPUSTATE_LIBNVML when set, else libnvidia-ml.so.1. The first
	// successful Open in a process fixes the library for the rest of it.
	Library string
	// UUID names the device as NVML and nvidia-smi print it
	// ("GPU-8a3f..."). Empty means the device NVML numbers 0, which need
	// not be the one CUDA numbers 0; prefer the UUID.
	UUID string
}

// ForBackend opens a Monitor for the device behind b. The backend must
// report its device's UUID, as the CUDA backend does; for any other backend
// the error wraps ErrUnavailable.
func ForBackend(b device.Backend) (*Monitor, error) {
	u, ok := b.(interface{ UUID() (string, error) })
	if !ok {
		return nil, fmt.Errorf("nvml: the %s backend has no NVIDIA device: %w", b.Name(), ErrUnavailable)
	}
	uuid, err := u.UUID()
	if err != nil {
		return nil, fmt.Errorf("nvml: the device's UUID: %v: %w", err, ErrUnavailable)
	}
	return Open(Options{UUID: uuid})
}
