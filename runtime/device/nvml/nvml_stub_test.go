//go:build !cgo || !linux

package nvml

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

func TestUnavailable(t *testing.T) {
	if _, err := Open(Options{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open: got %v, want ErrUnavailable", err)
	}
	if _, err := ForBackend(device.Host()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ForBackend(host): got %v, want ErrUnavailable", err)
	}
	var m Monitor
	if _, err := m.Memory(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Memory: got %v", err)
	}
	if err := m.Close(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Close: got %v", err)
	}
}
