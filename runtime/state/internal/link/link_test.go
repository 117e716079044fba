package link_test

import (
	"strings"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// This test binary links runtime/state without the store (it imports no
// generated handles and no stateimpl): NewPool says so rather than panic.
func TestNewPoolWithoutTheStore(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err == nil || p != nil || !strings.Contains(err.Error(), "no store is linked") {
		t.Fatalf("NewPool without the store: %v, %v; want the error that names it", p, err)
	}
}
