//go:build !linux

package device

import "fmt"

// openCUDA reports that the CUDA backend exists only on Linux.
func openCUDA() (Backend, error) {
	return nil, fmt.Errorf("device: cuda: the CUDA backend is built only on linux: %w", ErrNoDevice)
}
