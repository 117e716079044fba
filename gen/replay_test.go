package gen

import (
	"slices"
	"strings"
	"testing"
)

// TestStepMethod checks that Step is generated, with its directive, for
// contracts with a replay line, and for no others.
func TestStepMethod(t *testing.T) {
	for pkg, want := range map[string][]string{"replay": {"Recurrent", "Conv"}, "kv": nil, "grid": nil} {
		p := load(t, pkg)
		var got []string
		for _, c := range p.Contracts.Contracts {
			for _, m := range Methods(c) {
				if m.Name == "Step" {
					if m.Recv != RecvHead || m.Directive != "mutates" || m.When != "a replay line" {
						t.Errorf("%s: Step %+v", c.Type, m)
					}
					got = append(got, c.Type)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: Step generated for %v, want %v", pkg, got, want)
		}
	}
}

// TestStepClashes checks that a user's Step on a replayed state's handle is
// a clash, and a Step on a state without the line is not.
func TestStepClashes(t *testing.T) {
	p := load(t, "replay")
	const mine = `package replay

func (s *RecurrentState) Step() {}

type OtherState struct{}

func (s *OtherState) Step() {}
`
	got := clashesIn(t, p, mine)
	want := []string{
		"mine.go:3:26: RecurrentState.Step is declared here, and stategen generates RecurrentState.Step for state type Recurrent; rename it",
	}
	if !slices.Equal(got, want) {
		t.Errorf("clashes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
