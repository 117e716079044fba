// Package clash declares the names the runtime's packages go by: the
// generated file imports them under other names.
package clash

// state is the package's own notion of state.
var state = "ready"

// device names the device the package prefers.
func device() string { return state }

// Samples is a ring of audio samples, written in place.
//
//state:contract
//state:growth mutable bound=48000
//state:owner stream
//state:snapshot immutable
//state:branch isolated merge=unsupported
type Samples struct {
	Left, Right []int16
}
