//go:build !linux

package store

import "testing"

func fakeStreamRig(t *testing.T) *streamRig {
	t.Skip("the fake CUDA driver is built for Linux only")
	return nil
}
