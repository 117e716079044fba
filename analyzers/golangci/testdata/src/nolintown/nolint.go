// Package nolintown is checked with the fake analyzer under its own
// linter, fake.
package nolintown

func acquire() int { return 0 }

func plain() {
	acquire() // want "acquire called"
}

func byName() {
	acquire() //nolint:fake // want "acquire called"
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
	acquire() // want "acquire called"
}

func lineAbove() {
	//nolint:fake
	acquire() // want "acquire called"
}
