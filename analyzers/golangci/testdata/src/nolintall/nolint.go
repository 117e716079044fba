// Package nolintall is checked with the fake analyzer under the statevet
// linter.
package nolintall

func acquire() int { return 0 }

func plain() {
	acquire() // want "acquire called"
}

func byName() {
	acquire() //nolint:fake // dropped: golangci-lint would not match it
}

func byLinter() {
	acquire() //nolint:statevet,other // want "acquire called"
}

func everyLinter() {
	acquire() //nolint // want "acquire called"
}

func otherName() {
	acquire() //nolint:errcheck // want "acquire called"
}

//nolint:fake // the whole function
func node() {
	acquire()
}

func lineAbove() {
	//nolint:fake
	acquire()
}
