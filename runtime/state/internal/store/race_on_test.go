//go:build race

package store

// raceDetector says whether the tests run under the race detector, whose
// sync.Pool drops entries at random: purego's calls of the CUDA backend
// allocate then.
const raceDetector = true
