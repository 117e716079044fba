//go:build !cgo || !linux

package nvml

import "fmt"

// Monitor reads one device's memory through NVML. In this build NVML is
// unavailable and no Monitor is ever opened.
type Monitor struct{}

// Open fails: this build has no NVML (it needs cgo on Linux).
func Open(opt Options) (*Monitor, error) {
	return nil, fmt.Errorf("nvml: built without cgo on linux: %w", ErrUnavailable)
}

// Memory fails with ErrUnavailable.
func (m *Monitor) Memory() (Memory, error) {
	return Memory{}, fmt.Errorf("nvml: built without cgo on linux: %w", ErrUnavailable)
}

// Close fails with ErrUnavailable.
func (m *Monitor) Close() error {
	return fmt.Errorf("nvml: built without cgo on linux: %w", ErrUnavailable)
}
