package device

import (
	"errors"
	"fmt"
	"os"
)

// Environment variables that steer Open and OpenCUDA.
const (
	// EnvBackend forces Open's choice: "host" or "cuda". Empty or "auto"
	// lets Open pick.
	EnvBackend = "GPUSTATE_BACKEND"
	// EnvLibCUDA is the path of the CUDA driver library to load instead of
	// libcuda.so.1 and libcuda.so.
	EnvLibCUDA = "GPUSTATE_LIBCUDA"
)

// ErrNoDevice is returned, wrapped, when no CUDA device can be used: no
// driver library loads, the driver reports no device, or it is the stub
// library that the CUDA toolkit ships for linking.
var ErrNoDevice = errors.New("device: no CUDA device")

// Open returns the backend the environment asks for. With GPUSTATE_BACKEND
// unset, empty or "auto", it opens the CUDA backend on device 0, and falls
// back to the host backend when that fails with ErrNoDevice; any other CUDA
// failure (a driver library that lacks an entry point, a device that cannot
// be opened) is returned, so that a broken setup is not mistaken for a
// machine without a GPU. GPUSTATE_BACKEND=host returns Host().
// GPUSTATE_BACKEND=cuda returns the CUDA backend or the error that kept it
// from opening, never the host backend.
func Open() (Backend, error) {
	switch v := os.Getenv(EnvBackend); v {
	case "host":
		return Host(), nil
	case "cuda":
		b, err := openCUDA()
		if err != nil {
			return nil, fmt.Errorf("%w (%s=cuda)", err, EnvBackend)
		}
		return b, nil
	case "", "auto":
		b, err := openCUDA()
		if errors.Is(err, ErrNoDevice) {
			return Host(), nil
		}
		if err != nil {
			return nil, err
		}
		return b, nil
	default:
		return nil, fmt.Errorf("device: %s=%q: want host, cuda or auto", EnvBackend, v)
	}
}
