//go:build !race

package peerbench

// raceDetector says whether the tests run under the race detector, whose
// sync.Pool drops entries at random.
const raceDetector = false
