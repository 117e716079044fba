// Package statetest holds what the tests of runtime/state share: the model
// tests' flags (-model.steps, -model.seed) and the replay command a failure
// prints, and the test backends that wrap a device.Backend to inject
// faults, count calls, gate streams or hide optional interfaces.
//
// It imports runtime/device only, never runtime/state, so that the tests of
// package state (internal) and of package state_test (external) both use it.
package statetest
