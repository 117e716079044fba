package gen

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestShareAPI checks what a share line adds to the generated file, and
// that a type without one gets none of it.
func TestShareAPI(t *testing.T) {
	p := load(t, "prefix")
	files, err := p.Generate()
	if err != nil {
		t.Fatal(err)
	}
	src := make(map[string][]byte)
	for _, f := range files {
		src[f.Type] = f.Content
	}
	for _, tt := range []struct {
		typ, decl string
		want      bool
	}{
		{"Prompt", "\tShareKey:    \"Toks\",\n", true},
		{"Prompt", "//state:acquire\nfunc NewPromptStateShared(p *state.Pool, owner state.Owner, domain state.Domain) (*PromptState, error) {\n\ts := _Prompt_states.New()\n\tif err := stateimpl.NewSharedHeadInto(p, &s.mem, &_Prompt_layout, owner, domain); err != nil {\n", true},
		{"Prompt", "//state:appends\nfunc (s *PromptState) AdoptPrefix(keys []Token) (int, error) {\n\treturn _Prompt_head(s).AdoptPrefix(state.Bytes(keys))\n}", true},
		{"Prompt", "func NewPromptState(p *state.Pool, owner state.Owner) (*PromptState, error) {\n\ts := _Prompt_states.New()\n\tif err := stateimpl.NewHeadInto(p, &s.mem, &_Prompt_layout, owner); err != nil {", true},
		{"Private", "ShareKey", false},
		{"Private", "Shared", false},
		{"Private", "AdoptPrefix", false},
		{"Private", "Domain", false},
	} {
		if got := bytes.Contains(src[tt.typ], []byte(tt.decl)); got != tt.want {
			t.Errorf("%s: contains %q = %v, want %v", tt.typ, tt.decl, got, tt.want)
		}
	}
	for _, c := range p.Contracts.Contracts {
		shared := c.ShareKey != ""
		if got := slices.Contains(Names(c), "New"+c.Type+"StateShared"); got != shared {
			t.Errorf("%s: Names lists New%sStateShared = %v, want %v", c.Type, c.Type, got, shared)
		}
		var adopt *Method
		for _, m := range Methods(c) {
			if m.Name == "AdoptPrefix" {
				adopt = &m
			}
		}
		if (adopt != nil) != shared {
			t.Errorf("%s: Methods has AdoptPrefix = %v, want %v", c.Type, adopt != nil, shared)
		}
		if adopt != nil && (adopt.Recv != RecvHead || adopt.Directive != "appends" || adopt.When != "a share line") {
			t.Errorf("AdoptPrefix = %+v", *adopt)
		}
	}
}

// TestShareClashes checks that a user's declaration of a name the share
// line generates is a clash, and the same name for a type without the line
// is not.
func TestShareClashes(t *testing.T) {
	p := load(t, "prefix")
	const mine = `package prefix

func NewPromptStateShared() {}

func (s *PromptState) AdoptPrefix() {}

func NewPrivateStateShared() {}

func (s *PrivateState) AdoptPrefix() {}
`
	got := clashesIn(t, p, mine)
	want := []string{
		"mine.go:3:6: NewPromptStateShared is declared here, and stategen generates NewPromptStateShared for state type Prompt; rename it",
		"mine.go:5:23: PromptState.AdoptPrefix is declared here, and stategen generates PromptState.AdoptPrefix for state type Prompt; rename it",
	}
	if !slices.Equal(got, want) {
		t.Errorf("clashes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
