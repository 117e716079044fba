// Package handleerr returns errors of the acquired handle's own methods
// before the handle is released: the most common leak.
package handleerr

import "errors"

var errBusy = errors.New("busy")

// Table is a resource whose methods read through its fields.
type Table struct{ rows []int }

// Open returns a table to release.
//
//state:acquire
func Open(n int) (*Table, error) { return &Table{rows: make([]int, n)}, nil }

// Release releases the table.
//
//state:release
func (t *Table) Release() error { return nil }

// Read copies rows out of the table: its result holds part of t, not t.
func (t *Table) Read(from, to int) ([]int, error) { return copyRows(t.rows, from, to) }

// Check reports whether the table is usable.
func (t *Table) Check() error { return nil }

func copyRows(rows []int, from, to int) ([]int, error) {
	if from < 0 || to > len(rows) || from > to {
		return nil, errors.New("range")
	}
	return append([]int(nil), rows[from:to]...), nil
}

func readThenRelease(n int) (int, error) {
	t, err := Open(n) // want `Table acquired by Open is not released on every path; add defer t.Release\(\)`
	if err != nil {
		return 0, err
	}
	rows, err := t.Read(0, 1)
	if err != nil {
		return 0, err
	}
	t.Release()
	return len(rows), nil
}

func checkInIf(n int) error {
	t, err := Open(n) // want `Table acquired by Open is not released on every path; add defer t.Release\(\)`
	if err != nil {
		return err
	}
	if err := t.Check(); err != nil {
		return err
	}
	return t.Release()
}

func busy(n int) error {
	t, err := Open(n) // want `Table acquired by Open is not released on every path; add defer t.Release\(\)`
	if err != nil {
		return err
	}
	_, err = t.Read(0, 1)
	if errors.Is(err, errBusy) {
		return err
	}
	return t.Release()
}

// The release precedes the check of the read's error.
func releaseFirst(n int) (int, error) {
	t, err := Open(n)
	if err != nil {
		return 0, err
	}
	rows, err := t.Read(0, 1)
	t.Release()
	if err != nil {
		return 0, err
	}
	return len(rows), nil
}

func deferred(n int) (int, error) {
	t, err := Open(n)
	if err != nil {
		return 0, err
	}
	defer t.Release()
	rows, err := t.Read(0, 1)
	if errors.Is(err, errBusy) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return len(rows), nil
}

func releaseOnError(n int) (int, error) {
	t, err := Open(n)
	if err != nil {
		return 0, err
	}
	rows, err := t.Read(0, 1)
	if err != nil {
		t.Release()
		return 0, err
	}
	return len(rows), t.Release()
}
