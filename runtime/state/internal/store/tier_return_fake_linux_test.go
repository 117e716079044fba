//go:build linux

package store

import "testing"

// TestTierReturnFailureSurfaces: a head brought back from the tier
// whose copies back fail is not moved out again by a tier that waits for
// them (tierableLocked's land): the failure must reach the head's next
// call, not be dropped with the events the wait closed.
func TestTierReturnFailureSurfaces(t *testing.T) {
	f, _, _, h := fakeTierHead(t)
	if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
		t.Fatalf("move out: %v, %v", moved, err)
	}
	f.Must(t, "hold", 1)
	check(t, h.Prefetch())
	if len(h.async.inflight) == 0 {
		t.Skip("the return was not queued")
	}
	f.Must(t, "hold", 0)
	f.Must(t, "fail:cuEventQuery", 999)       // CUDA_ERROR_UNKNOWN
	f.Must(t, "fail:cuEventSynchronize", 999) // the copies back failed (a sticky error)
	_, moved, _ := (tierHead{h}).moveOut()
	if moved {
		t.Fatal("moved out with its copies back failed")
	}
	err := h.Read(0, 2, [][]byte{make([]byte, 512)})
	f.Must(t, "fail:cuEventQuery", 0)
	f.Must(t, "fail:cuEventSynchronize", 0)
	if err == nil {
		t.Fatal("the copies back from the tier failed, and the next call answered nil")
	}
	t.Logf("next call: %v", err)
}
