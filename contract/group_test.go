package contract

import (
	"strings"
	"testing"
)

// groupSrc declares two state types a group may couple; GROUP is replaced
// by the group under test.
const groupSrc = `package p

//state:contract
//state:growth append bound=64
//state:owner session
type KV struct{ Keys []float32 }

//state:contract
//state:growth mutable bound=4
//state:owner session
type Rec struct{ H []float32 }

//state:contract
//state:growth mutable bound=4
//state:owner request
type Req struct{ H []float32 }

//state:contract
//state:growth mutable bound=4
//state:owner session
//state:retention optional
type Opt struct{ H []float32 }

//state:contract
//state:growth mutable bound=4
type Bad struct{ H []float32 }

type Plain struct{ X int }

GROUP
`

func TestGroup(t *testing.T) {
	src := strings.Replace(groupSrc, "GROUP", `// Decoder is one session's state.
//
//state:group purpose="hybrid decoder"
//state:owner session
type Decoder struct {
	KV  KV
	Rec Rec
}`, 1)
	fset, p := parse(t, src)
	if d := diags(fset, p); len(d) != 1 { // Bad's missing owner alone
		t.Fatalf("diagnostics:\n%s", strings.Join(d, "\n"))
	}
	if len(p.Groups) != 1 {
		t.Fatalf("%d groups, want 1", len(p.Groups))
	}
	g := p.Groups[0]
	if g.Type != "Decoder" || g.Purpose != "hybrid decoder" || g.Owner != "session" || !g.Valid || g.Object() == nil {
		t.Errorf("group %+v", g)
	}
	if len(g.Members) != 2 || g.Members[0] != (Member{Name: "KV", Type: "KV", Pos: g.Members[0].Pos}) || g.Members[1].Name != "Rec" || g.Members[1].Type != "Rec" {
		t.Errorf("members %+v", g.Members)
	}
	if p.Contract("KV") == nil || p.Contract("Decoder") != nil {
		t.Errorf("Contract looks up state types only")
	}
}

// TestGroupErrors checks each fault of a group: its message and its line
// (relative to the group line), and that the group is not valid.
func TestGroupErrors(t *testing.T) {
	for _, tc := range []struct {
		name, group string
		line        int    // of the diagnostic, from the //state:group line (0)
		want        string // in the message
	}{
		{"one member", "//state:group\n//state:owner session\ntype G struct{ KV KV }", 0,
			"group G has 1 member; a group couples at least two state types"},
		{"no member", "//state:group\n//state:owner session\ntype G struct{}", 0, "group G has 0 members"},
		{"no owner", "//state:group\ntype G struct{ KV KV; Rec Rec }", 0,
			"group G has no //state:owner line; add //state:owner KIND"},
		{"not a state type", "//state:group\n//state:owner session\ntype G struct {\n\tKV KV\n\tX Plain\n}", 4,
			"field X of group G has type Plain, which is not a state type of this package"},
		{"pointer", "//state:group\n//state:owner session\ntype G struct {\n\tKV *KV\n\tRec Rec\n}", 3,
			"field KV of group G has type *KV; a member is a state type declared in this package (write KV, not *KV)"},
		{"slice", "//state:group\n//state:owner session\ntype G struct {\n\tKV []KV\n\tRec Rec\n}", 3, "has type []KV"},
		{"embedded", "//state:group\n//state:owner session\ntype G struct {\n\tKV\n\tRec Rec\n}", 3,
			"embedded field KV of group G has no name of its own; name each member"},
		{"owner kind", "//state:group\n//state:owner session\ntype G struct {\n\tKV KV\n\tR Req\n}", 4,
			"member R of group G is a state of owner kind request, and the group's owner kind is session; a group has one owner"},
		{"retention", "//state:group\n//state:owner session\ntype G struct {\n\tKV KV\n\tO Opt\n}", 4,
			"member O of group G has retention optional, and member KV has retention mandatory; members agree on retention"},
		{"member line", "//state:group\n//state:owner session\n//state:rollback descendants=keep\ntype G struct{ KV KV; Rec Rec }", 2,
			"//state:rollback on group G: a group takes only //state:group and //state:owner"},
		{"repeated", "//state:group\n//state:owner session\n//state:group\ntype G struct{ KV KV; Rec Rec }", 2, "repeated //state:group on group G"},
		{"purpose word", "//state:group hybrid\n//state:owner session\ntype G struct{ KV KV; Rec Rec }", 0, `unexpected argument "hybrid" in //state:group of G; write purpose="..."`},
		{"not a struct", "//state:group\n//state:owner session\ntype G []KV", 0, "group G is not a struct type"},
		{"nested", "//state:group\n//state:owner session\ntype H struct{ KV KV; Rec Rec }\n\n//state:group\n//state:owner session\ntype G struct{ H H; KV KV }", 6,
			"field H of group G is group H; groups do not nest"},
		{"func verb", "//state:group\n//state:owner session\n//state:acquire\ntype G struct{ KV KV; Rec Rec }", 2, "//state:acquire applies to a func or method, not to group G"},
		{"contract and group", "//state:contract\n//state:group\n//state:growth append bound=1\n//state:owner session\ntype G struct{ X []int32 }", 1,
			"//state:group on state type G: a type is a state type or a group of state types, not both"},
	} {
		src := strings.Replace(groupSrc, "GROUP", tc.group, 1)
		fset, p := parse(t, src)
		base := strings.Count(src[:strings.Index(src, tc.group)], "\n") + 1
		found := false
		for _, d := range p.Diagnostics {
			if d.Type == "Bad" {
				continue
			}
			if strings.Contains(d.Message, tc.want) && fset.Position(d.Pos).Line == base+tc.line {
				found = true
			} else if d.Type == "G" {
				t.Errorf("%s: other diagnostic: %d: %s", tc.name, fset.Position(d.Pos).Line-base, d.Message)
			}
		}
		if !found {
			t.Errorf("%s: no diagnostic %q at line +%d; got:\n%s", tc.name, tc.want, tc.line, strings.Join(diags(fset, p), "\n"))
		}
		for _, g := range p.Groups {
			if g.Type == "G" && g.Valid {
				t.Errorf("%s: group valid despite the fault", tc.name)
			}
		}
	}
}

// TestGroupInvalidMember: a member whose contract has errors makes the
// group invalid, and the group adds no finding of its own (no cascade).
func TestGroupInvalidMember(t *testing.T) {
	src := strings.Replace(groupSrc, "GROUP", "//state:group\n//state:owner session\ntype G struct{ KV KV; B Bad }", 1)
	fset, p := parse(t, src)
	for _, d := range p.Diagnostics {
		if d.Type == "G" {
			t.Errorf("cascade: %d: %s", fset.Position(d.Pos).Line, d.Message)
		}
	}
	if len(p.Groups) != 1 || p.Groups[0].Valid {
		t.Errorf("group with an invalid member: %+v", p.Groups)
	}
}
