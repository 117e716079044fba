package contract

import (
	"go/token"
	"strings"
	"unicode"
)

// Names are the package-level names, and the file, that stategen generates
// for a state type or a group (docs/INTERNALS.md, "contract"). Every part of
// the module that names generated code asks GeneratedNames, so the rule is
// spelled once.
type Names struct {
	Head       string // TState: the live head (a group's handle: GState)
	Snapshot   string // TSnapshot: the immutable snapshot (GSnapshot)
	Spans      string // TSpans: the device location of rows (state types only)
	Ctor       string // NewTState, or newTState for an unexported T
	SharedCtor string // NewTStateShared, with a share line (or a member's)
	File       string // t_state.go: the type's name in lower case (see VariantFile)
}

// GeneratedNames returns the names stategen generates for the state type
// or group named typ.
func GeneratedNames(typ string) Names {
	ctor := "New" + typ + "State"
	if !token.IsExported(typ) {
		r := []rune(typ)
		if len(r) > 0 {
			r[0] = unicode.ToUpper(r[0])
		}
		ctor = "new" + string(r) + "State"
	}
	return Names{
		Head:       typ + "State",
		Snapshot:   typ + "Snapshot",
		Spans:      typ + "Spans",
		Ctor:       ctor,
		SharedCtor: ctor + "Shared",
		File:       strings.ToLower(typ) + "_state.go",
	}
}

// VariantFile returns the name of the file generated for the type when it
// is declared under a build constraint, spelt as words (lower-case letters,
// digits and underscores): t_state_words.go.
func (n Names) VariantFile(words string) string {
	return strings.TrimSuffix(n.File, ".go") + "_" + words + ".go"
}

// GeneratedFor returns the state type or group T for which stategen
// generated the type named name, its head (TState) or its snapshot
// (TSnapshot), when declared(T) holds; ok is false when name is neither
// for any such T. The analyzers ask it to trace a generated type back to
// its contract.
func GeneratedFor(name string, declared func(typ string) bool) (typ string, n Names, ok bool) {
	for i := 1; i < len(name); i++ {
		n := GeneratedNames(name[:i])
		if (n.Head == name || n.Snapshot == name) && declared(name[:i]) {
			return name[:i], n, true
		}
	}
	return "", Names{}, false
}
