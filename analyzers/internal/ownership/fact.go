// Package ownership holds what statevet knows about the plain Go functions
// a package calls: the facts inferred from their bodies (acquirer, takes,
// releases, writes), and the Oracle that answers, from those facts and the
// function directives, what a call does to its operands.
//
// Writes are inferred here, in every package, by a single syntactic pass
// (no CFG). Acquirer, takes and releases are inferred by the obligation
// analysis of package stownership: Infer runs it over the package's function
// declarations callees first and merges what it finds into the facts, and
// Export hands them to the packages that import this one, the standard
// library's callers included, so wrappers and helpers need no directive.
package ownership

import (
	"fmt"
	"strings"
)

// Fact records what statevet inferred about a plain Go function from its body,
// so that callers in other packages see it as if it carried the directives.
// Parameters are numbered from 0; -1 is the receiver.
type Fact struct {
	Acquirer bool  // returns as its first result a resource it acquired and did not release
	Takes    []int // releases or keeps (stores, returns, hands on) these parameters on every path
	Releases []int // releases these parameters on every path (a subset of Takes)
	// Disposes lists the parameters of interface or type-parameter type
	// (or variadic over one) on which the function calls, on every path,
	// a method that may be their release: no arguments, and no result or
	// an error (a generic releaseAll's x.Release()). A subset of Takes; a
	// superset of Releases. For an argument whose release method is such
	// a method of the parameter's type, the call releases it.
	Disposes []int
	Writes   []int // writes through these parameters
	// ErrMap marks a function that returns a nil error exactly when its
	// error argument is nil (return nil under a nil check of it, and a
	// value that cannot be nil everywhere else).
	ErrMap bool
	// Releaser is the index, plus one, of a result that is a func()
	// releasing the first result (return w, func() { w.Close() }, nil);
	// 0: none.
	Releaser int
	// Results lists the results after the first that the function also
	// returns acquired and not released (return img, mem, nil).
	Results []int
}

// AFact marks Fact as an analysis fact.
func (*Fact) AFact() {}

// String lists what the fact records, for tests and -debug output.
func (f *Fact) String() string {
	var parts []string
	if f.Acquirer {
		parts = append(parts, "acquirer")
	}
	list := func(name string, ps []int) {
		if len(ps) > 0 {
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = fmt.Sprint(p)
			}
			parts = append(parts, name+"("+strings.Join(s, ",")+")")
		}
	}
	list("takes", f.Takes)
	list("releases", f.Releases)
	list("disposes", f.Disposes)
	list("writes", f.Writes)
	list("results", f.Results)
	if f.ErrMap {
		parts = append(parts, "errmap")
	}
	if f.Releaser > 0 {
		parts = append(parts, fmt.Sprintf("releaser(%d)", f.Releaser-1))
	}
	return strings.Join(parts, " ")
}

func (f *Fact) empty() bool {
	return !f.Acquirer && len(f.Takes) == 0 && len(f.Releases) == 0 && len(f.Disposes) == 0 && len(f.Writes) == 0 && !f.ErrMap && f.Releaser == 0 && len(f.Results) == 0
}
