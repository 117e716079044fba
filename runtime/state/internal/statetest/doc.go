// Package statetest holds what the tests of runtime/state share: the model
// tests' flags (-model.steps, -model.seed) and the replay command a failure
// prints, and the test backends: wrappers of a device.Backend that inject
// faults (Faults, StreamFaults), count calls (Counts, and StreamCounts,
// BatchCounts and RecordCounts, which show the streams and batches too),
// hold Free (GatedFree) or hide optional interfaces (Plain); Arena, a
// backend whose allocations lie back to back; and StreamRig, the host
// backend or the CUDA backend over the fake driver, with kernels that fill
// memory and hold a stream back.
//
// It imports runtime/device and internal/fakecuda only, never
// runtime/state, so that the tests of package state (internal) and of
// package state_test (external) both use it. A test binary that runs a
// StreamRig on the fake driver calls fakecuda.Cleanup in its TestMain.
package statetest
