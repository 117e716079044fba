//go:build !linux

package state

import "testing"

func fakeStreamRig(t *testing.T) *streamRig {
	t.Skip("the fake CUDA driver is built for Linux only")
	return nil
}
