// Package errmap has error mappers and look-alikes without directives:
// the errmap facts are inferred in every package, active or not.
package errmap

import (
	"errors"
	"fmt"
)

var ErrLost = errors.New("lost")

type Error struct{ err error }

func (e *Error) Error() string { return e.err.Error() }

// Wrap guards the nil error first and wraps every other.
func Wrap(err error) error { // want Wrap:"errmap"
	if err == nil {
		return nil
	}
	return fmt.Errorf("gpu: %w", err)
}

// Code maps by kind, never to nil.
func Code(op string, err error) error { // want Code:"errmap"
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrLost) {
		return ErrLost
	}
	return &Error{err}
}

// Inverse is the other shape: the non-nil branch first.
func Inverse(err error) error { // want Inverse:"errmap"
	if err != nil {
		return &Error{err}
	}
	return nil
}

// Ignore maps one error to nil: no errmap.
func Ignore(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrLost) {
		return nil
	}
	return err
}

// Passed returns what a helper returns, which may be nil: no errmap.
func Passed(err error) error {
	if err == nil {
		return nil
	}
	return helper(err)
}

func helper(err error) error { return nil }

// Reassigned changes its argument: no errmap.
func Reassigned(err error) error {
	if err == nil {
		return nil
	}
	err = nil
	return err
}

// NoGuard has no guard: no errmap.
func NoGuard(err error) error { return fmt.Errorf("x: %w", err) }

// Two takes two errors: no errmap.
func Two(a, b error) error {
	if a == nil {
		return nil
	}
	return a
}
