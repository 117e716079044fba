package gen

import (
	"bytes"
	"strings"
	"testing"
)

// TestGroupAPI checks that a group has exactly the calls every member
// allows, with the directives statevet reads.
func TestGroupAPI(t *testing.T) {
	files, err := load(t, "hybrid").Generate()
	if err != nil {
		t.Fatal(err)
	}
	byType := make(map[string][]byte)
	for _, f := range files {
		byType[f.Type] = f.Content
	}
	for _, tt := range []struct {
		typ, decl string
		want      bool
	}{
		{"Decoder", "//state:acquire\nfunc NewDecoderState(p *state.Pool, owner state.Owner) (*DecoderState, error)", true},
		{"Decoder", "//state:acquire\nfunc NewDecoderStateShared(p *state.Pool, owner state.Owner, domain state.Domain) (*DecoderState, error)", true},
		{"Decoder", "//state:appends\nfunc (g *DecoderState) AdoptPrefix(keys []Token) (int, error)", true},
		{"Decoder", "//state:view\nfunc (g *DecoderState) KV() *KVCacheState", true},
		{"Decoder", "//state:view\nfunc (g *DecoderState) Rec() *RecurrentState", true},
		{"Decoder", "//state:acquire\nfunc (g *DecoderState) Snapshot() (*DecoderSnapshot, error)", true},
		{"Decoder", "//state:acquire\nfunc (g *DecoderState) Branch() (*DecoderState, error)", true},
		{"Decoder", "//state:mutates\nfunc (g *DecoderState) Merge(child *DecoderState) error", true},
		{"Decoder", "//state:mutates\nfunc (g *DecoderState) Rollback(to *DecoderSnapshot) error", true},
		{"Decoder", "func (g *DecoderState) Stats() state.Stats", true},
		{"Decoder", "//state:release\nfunc (g *DecoderState) Release() error", true},
		{"Decoder", "//state:snapshot\ntype DecoderSnapshot struct", true},
		{"Decoder", "//state:view\nfunc (v *DecoderSnapshot) KV() *KVCacheSnapshot", true},
		{"Decoder", "//state:release\nfunc (v *DecoderSnapshot) Release() error", true},
		{"Traced", "AdoptPrefix", false},
		{"Traced", "func NewTracedState(", true},
		{"Traced", "NewTracedStateShared", false},
		{"Traced", "func (g *TracedState) Branch(", false},
		{"Traced", "func (g *TracedState) Merge(", false},
		{"Traced", "func (g *TracedState) Rollback(to *TracedSnapshot) error", true},
		{"Traced", "Snapshot, Rollback and Release act on all of them", true},
	} {
		if got := bytes.Contains(byType[tt.typ], []byte(tt.decl)); got != tt.want {
			t.Errorf("%s: contains %q = %v, want %v", tt.typ, tt.decl, got, tt.want)
		}
	}
	if _, ok := byType["Decoder"]; !ok || files[len(files)-2].Name != "decoder_state.go" {
		t.Errorf("group files: %v", len(files))
	}
}

// TestGroupClashes: a user declaration of a name generated for a group is
// a clash that names the group.
func TestGroupClashes(t *testing.T) {
	p := load(t, "groupclash")
	var got []string
	for _, c := range p.Clashes() {
		got = append(got, c.Message)
	}
	want := []string{
		"NewPairState is declared here, and stategen generates NewPairState for group Pair; rename it",
		"PairSnapshot is declared here, and stategen generates PairSnapshot for group Pair; rename it",
		"PairState.B is declared here, and stategen generates PairState.B for group Pair; rename it",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("clashes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := p.Generate(); err == nil {
		t.Fatal("Generate with a clash succeeded")
	}
}
