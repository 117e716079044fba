//go:build !linux

package statetest

import "testing"

// FakeStreamRig skips t: the fake CUDA driver is built for Linux only.
func FakeStreamRig(t *testing.T) *StreamRig {
	t.Skip("the fake CUDA driver is built for Linux only")
	return nil
}
