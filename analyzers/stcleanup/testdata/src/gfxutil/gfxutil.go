// Package gfxutil maps the binding's errors: its error mapper is inferred
// here and seen, through a fact, by the packages that import it.
package gfxutil

import "fmt"

// Map wraps a binding error; nil stays nil.
func Map(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("vk: %w", err)
}
