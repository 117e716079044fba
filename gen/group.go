package gen

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/gpustate/gpustate/contract"
)

// A groupModel is a //state:group ready to render: the group and the
// contract of each member.
type groupModel struct {
	g       *contract.Group
	pkg     string // import path
	name    string // package name
	members []*contract.Contract
	// shadow: the names of the runtime's packages ("state", "stateimpl")
	// that the package declares itself, so that they are imported as
	// gpustatestate and gpustatestateimpl.
	shadow map[string]bool
	// key is the model of the first member that shares a prefix, whose
	// key field types AdoptPrefix's keys; nil when no member shares.
	key *model
}

// What every member allows, so the group allows it (docs/GUIDE.md,
// "Coupled state").
func (m *groupModel) all(ok func(*contract.Contract) bool) bool {
	for _, c := range m.members {
		if !ok(c) {
			return false
		}
	}
	return true
}

func (m *groupModel) snapshot() bool { return m.all(snapshot) }
func (m *groupModel) branch() bool   { return m.all(branch) }
func (m *groupModel) merge() bool    { return m.all(merge) }
func (m *groupModel) rollback() bool { return m.all(rollback) }
func (m *groupModel) history() bool  { return m.all(history) }

// shared reports whether a member shares a prefix: NewGStateShared and
// AdoptPrefix.
func (m *groupModel) shared() bool { return m.sharedIndex() >= 0 }

// sharedIndex is the index of the first member that shares a prefix, -1
// when none: the member whose block boundaries register the others.
func (m *groupModel) sharedIndex() int {
	for i, c := range m.members {
		if shared(c) {
			return i
		}
	}
	return -1
}

func (m *groupModel) names() contract.Names { return contract.GeneratedNames(m.g.Type) }

// Helper and field names of a group's file: with a leading underscore, so
// that no member's accessor and no user declaration takes them.
func wrapName(typ string) string      { return "_" + typ + "_wrap" }
func groupOfName(typ string) string   { return "_" + typ + "_group" }
func cutOfName(typ string) string     { return "_" + typ + "_cut" }
func memberField(name string) string  { return "_" + name }
func groupField() string              { return "_group" }
func cutField() string                { return "_cut" }
func groupMemberIndex(i int) jen.Code { return jen.Lit(i) }

// GroupNames returns every package-level name the file generated for
// group g declares, given the contracts of its members.
func GroupNames(g *contract.Group, members []*contract.Contract) []string {
	m := &groupModel{g: g, members: members}
	n := m.names()
	out := []string{n.Ctor}
	if m.shared() {
		out = append(out, n.SharedCtor)
	}
	out = append(out, n.Head)
	if m.snapshot() {
		out = append(out, n.Snapshot, cutOfName(g.Type))
	}
	return append(out, wrapName(g.Type), groupOfName(g.Type))
}

// groupMembers returns, for each type generated for group g, the names its
// methods take.
func groupMembers(g *contract.Group, members []*contract.Contract) map[string][]string {
	m := &groupModel{g: g, members: members}
	n := m.names()
	head := []string{"Stats", "Release"}
	var snap []string
	for _, mem := range g.Members {
		head = append(head, mem.Name, memberField(mem.Name))
		snap = append(snap, mem.Name, memberField(mem.Name))
	}
	head = append(head, groupField())
	for op, ok := range map[string]bool{"Snapshot": m.snapshot(), "Branch": m.branch(), "Merge": m.merge(), "Rollback": m.rollback(), "At": m.history(), "Plan": m.history(), "AdoptPrefix": m.shared()} {
		if ok {
			head = append(head, op)
		}
	}
	out := map[string][]string{n.Head: head}
	if m.snapshot() {
		out[n.Snapshot] = append(snap, "Release", cutField())
	}
	return out
}

// groupModel returns the model of group g: its members' contracts.
func (p *Package) groupModel(g *contract.Group) (*groupModel, error) {
	m := &groupModel{g: g, pkg: p.types.Path(), name: p.types.Name(), shadow: map[string]bool{
		"state":     p.types.Scope().Lookup("state") != nil,
		"stateimpl": p.types.Scope().Lookup("stateimpl") != nil,
	}}
	for _, mem := range g.Members {
		c := p.Contracts.Contract(mem.Type)
		if c == nil {
			return nil, fmt.Errorf("%s: member %s of group %s: state type %s not found", p.Path, mem.Name, g.Type, mem.Type)
		}
		m.members = append(m.members, c)
	}
	if i := m.sharedIndex(); i >= 0 {
		km, err := p.model(m.members[i])
		if err != nil {
			return nil, err
		}
		m.key = km
	}
	return m, nil
}

// renderGroup writes the file of a group: its handle, constructors,
// accessors and the calls every member allows, and its snapshot.
func renderGroup(m *groupModel) ([]byte, error) {
	f := jen.NewFilePathName(m.pkg, m.name)
	f.HeaderComment(Header)
	for path, name := range map[string]string{statePkg: "state", implPkg: "stateimpl"} {
		if m.shadow[name] {
			f.ImportAlias(path, "gpustate"+name)
		} else {
			f.ImportName(path, name)
		}
	}
	f.Add(m.headDecl())
	f.Line()
	f.Add(m.slabDecl())
	for _, code := range m.decls() {
		f.Line()
		f.Add(code)
	}
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// slabDecl declares the slabs the group's handles come from
// (stateimpl.Slab).
func (m *groupModel) slabDecl() jen.Code {
	n := m.names()
	defs := []jen.Code{jen.Id(slabName(m.g.Type, "states")).Add(st("Slab")).Types(jen.Id(n.Head))}
	if m.snapshot() {
		defs = append(defs, jen.Id(slabName(m.g.Type, "snapshots")).Add(st("Slab")).Types(jen.Id(n.Snapshot)))
	}
	return jen.Comment("The handles of " + m.g.Type + " groups and cuts, carved from larger allocations.").Line().Var().Defs(defs...)
}

// decls are the group's functions and methods, in file order.
func (m *groupModel) decls() []jen.Code {
	out := []jen.Code{m.ctorCode()}
	if m.shared() {
		out = append(out, m.sharedCtorCode())
	}
	out = append(out, m.wrapCode(), m.groupOfCode())
	out = append(out, m.accessors()...)
	if m.snapshot() {
		out = append(out, m.snapshotCode())
	}
	if m.branch() {
		out = append(out, m.branchCode())
	}
	if m.merge() {
		out = append(out, m.mergeCode())
	}
	if m.rollback() {
		out = append(out, m.rollbackCode())
	}
	if m.history() {
		out = append(out, m.atCode(), m.planCode())
	}
	if m.shared() {
		out = append(out, m.adoptCode())
	}
	out = append(out, m.statsCode(), m.releaseCode())
	if m.snapshot() {
		out = append(out, m.snapDecl(), m.cutOfCode())
		out = append(out, m.snapAccessors()...)
		out = append(out, m.snapReleaseCode())
	}
	return out
}

// memberList names the members in prose: "KV (a KVCache state) and Rec
// (a Recurrent state)".
func (m *groupModel) memberList() string {
	parts := make([]string, len(m.g.Members))
	for i, mem := range m.g.Members {
		parts[i] = fmt.Sprintf("%s (%s state)", mem.Name, article(mem.Type))
	}
	if len(parts) == 2 {
		return parts[0] + " and " + parts[1]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// ops names the calls that move the members together.
func (m *groupModel) ops() string {
	ops := []string{}
	for _, o := range []struct {
		name string
		ok   bool
	}{{"Snapshot", m.snapshot()}, {"Branch", m.branch()}, {"Merge", m.merge()}, {"Rollback", m.rollback()}} {
		if o.ok {
			ops = append(ops, o.name)
		}
	}
	if len(ops) == 0 {
		return "Release"
	}
	return strings.Join(ops, ", ") + " and Release"
}

func (m *groupModel) headDecl() jen.Code {
	n := m.names()
	first := fmt.Sprintf("%s is a live %s group of %s", n.Head, m.g.Type, article(m.g.Owner))
	if p := strings.TrimSuffix(strings.TrimSpace(m.g.Purpose), "."); p != "" {
		first += ": " + p
	}
	paras := []string{
		first + ".",
		fmt.Sprintf("Its members, %s, move together: %s act on all of them, atomically, and a failed call changes none. A member's own writes, reads, spans, snapshots and branches are its own; its Rollback, Merge and Release answer state.ErrCoupled, as they are the group's to call.", m.memberList(), m.ops()),
	}
	fields := []jen.Code{jen.Id(groupField()).Op("*").Add(st("Group"))}
	for i, mem := range m.g.Members {
		fields = append(fields, jen.Id(memberField(mem.Name)).Id(contract.GeneratedNames(m.members[i].Type).Head)) // by value: one allocation
	}
	return doc(paras).Type().Id(n.Head).Struct(fields...)
}

// layouts are the members' layouts, in order, as arguments.
func (m *groupModel) layouts() []jen.Code {
	out := make([]jen.Code, len(m.members))
	for i, c := range m.members {
		out[i] = jen.Op("&").Id(layoutName(c.Type))
	}
	return out
}

func (m *groupModel) ctorCode() jen.Code {
	n := m.names()
	args := append([]jen.Code{jen.Id("p"), jen.Id("owner")}, m.layouts()...)
	return doc([]string{
		fmt.Sprintf("%s creates %s group in pool p, owned by owner (%s): a new state of each member, or none when one cannot be made.", n.Ctor, article(m.g.Type), article(m.g.Owner)),
		releaseDuty("group"),
	}, "acquire").Func().Id(n.Ctor).Params(
		jen.Id("p").Op("*").Add(st("Pool")),
		jen.Id("owner").Add(st("Owner")),
	).Params(jen.Op("*").Id(n.Head), jen.Error()).Block(m.wrapped(st("NewGroup").Call(args...))...)
}

func (m *groupModel) sharedCtorCode() jen.Code {
	n := m.names()
	args := append([]jen.Code{jen.Id("p"), jen.Id("owner"), jen.Id("domain")}, m.layouts()...)
	mem := m.g.Members[m.sharedIndex()].Name
	return doc([]string{
		fmt.Sprintf("%s creates %s group in pool p, owned by owner (%s), in the sharing domain domain: every member, or none. Whenever an Append of %s ends at a block boundary, the group registers the state of every member as it is then (copy-on-write, as a snapshot holds it), so that a later group of the domain adopts it with AdoptPrefix instead of computing it again. Write the other members for a token before appending its %s row. The registered states are optional retention: the pool evicts them under memory pressure.", n.SharedCtor, article(m.g.Type), article(m.g.Owner), mem, mem),
		releaseDuty("group"),
	}, "acquire").Func().Id(n.SharedCtor).Params(
		jen.Id("p").Op("*").Add(st("Pool")),
		jen.Id("owner").Add(st("Owner")),
		jen.Id("domain").Add(st("Domain")),
	).Params(jen.Op("*").Id(n.Head), jen.Error()).Block(m.wrapped(st("NewSharedGroup").Call(args...))...)
}

// adoptCode renders the group's AdoptPrefix, whose keys are a slice of the
// shared member's key field's element type.
func (m *groupModel) adoptCode() jen.Code {
	c := m.members[m.sharedIndex()]
	mem := m.g.Members[m.sharedIndex()].Name
	var elem jen.Code = jen.Int64() // not reached: a share line names a field
	for _, f := range m.key.fields {
		if f.Name == c.ShareKey {
			elem = m.key.typeCode(f.elem)
		}
	}
	return doc([]string{
		fmt.Sprintf("AdoptPrefix gives an empty group the states every member had at the longest prefix of keys (the %s values of %s) that a group of its domain registered, each member as a new version, and returns the rows of %s adopted: a multiple of %s. The caller then computes only the rest, from keys[rows:]. Every member moves, or none; a group whose %s has rows answers state.ErrRange, and one made by %s adopts nothing.",
			c.ShareKey, mem, mem, blockRowsPhrase(c), mem, m.names().Ctor),
	}, "appends").Func().Params(m.recv()).Id("AdoptPrefix").Params(jen.Id("keys").Index().Add(elem)).Params(jen.Int(), jen.Error()).Block(
		jen.Return(m.gcall("AdoptPrefix", st("Bytes").Call(jen.Id("keys")))),
	)
}

// wrapped assigns a *state.Group to g and returns it wrapped, or the error.
func (m *groupModel) wrapped(call jen.Code) []jen.Code {
	return []jen.Code{
		jen.List(jen.Id("g"), jen.Err()).Op(":=").Add(call),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Id(wrapName(m.g.Type)).Call(jen.Id("g")), jen.Nil()),
	}
}

func (m *groupModel) wrapCode() jen.Code {
	n := m.names()
	body := []jen.Code{
		jen.Id("s").Op(":=").Id(slabName(m.g.Type, "states")).Dot("New").Call(),
		jen.Id("s").Dot(groupField()).Op("=").Id("g"),
	}
	for i, mem := range m.g.Members {
		body = append(body, jen.Id("s").Dot(memberField(mem.Name)).Dot("h").Op("=").Id("g").Dot("Head").Call(groupMemberIndex(i)))
	}
	return doc([]string{
		fmt.Sprintf("%s gives the group g and its member heads their types.", wrapName(m.g.Type)),
	}).Func().Id(wrapName(m.g.Type)).Params(jen.Id("g").Op("*").Add(st("Group"))).Op("*").Id(n.Head).Block(
		append(body, jen.Return(jen.Id("s")))...,
	)
}

// groupOfCode renders the helper that gives a group handle's
// *state.Group, nil for a nil handle: the store's group answers
// state.ErrReleased on a nil receiver, as heads do.
func (m *groupModel) groupOfCode() jen.Code {
	return doc([]string{
		fmt.Sprintf("%s returns the group g wraps; nil for a nil g, which the store answers with state.ErrReleased.", groupOfName(m.g.Type)),
	}).Func().Id(groupOfName(m.g.Type)).Params(m.recv()).Op("*").Add(st("Group")).Block(
		jen.If(jen.Id("g").Op("==").Nil()).Block(jen.Return(jen.Nil())),
		jen.Return(jen.Id("g").Dot(groupField())),
	)
}

// cutOfCode renders groupOfCode's twin for the group's snapshot.
func (m *groupModel) cutOfCode() jen.Code {
	return doc([]string{
		fmt.Sprintf("%s returns the cut v wraps; nil for a nil v.", cutOfName(m.g.Type)),
	}).Func().Id(cutOfName(m.g.Type)).Params(m.snapRecv()).Op("*").Add(st("GroupSnap")).Block(
		jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Return(jen.Nil())),
		jen.Return(jen.Id("v").Dot(cutField())),
	)
}

func (m *groupModel) recv() *jen.Statement     { return jen.Id("g").Op("*").Id(m.names().Head) }
func (m *groupModel) snapRecv() *jen.Statement { return jen.Id("v").Op("*").Id(m.names().Snapshot) }
func (m *groupModel) gcall(name string, args ...jen.Code) *jen.Statement {
	return jen.Id(groupOfName(m.g.Type)).Call(jen.Id("g")).Dot(name).Call(args...)
}

func (m *groupModel) accessors() []jen.Code {
	var out []jen.Code
	for i, mem := range m.g.Members {
		head := contract.GeneratedNames(m.members[i].Type).Head
		out = append(out, doc([]string{
			fmt.Sprintf("%s returns the group's %s state, coupled: write, read, snapshot and branch it as any %s; roll it back, merge it and release it through the group, as its own Rollback, Merge and Release answer state.ErrCoupled.", mem.Name, mem.Type, head),
		}, "view").Func().Params(m.recv()).Id(mem.Name).Params().Op("*").Id(head).Block(
			jen.If(jen.Id("g").Op("==").Nil()).Block(jen.Return(jen.Nil())),
			jen.Return(jen.Op("&").Id("g").Dot(memberField(mem.Name))),
		))
	}
	return out
}

// cutValue is the group snapshot of the store's cut named cut.
func (m *groupModel) cutValue() jen.Code {
	d := jen.Dict{jen.Id(cutField()): jen.Id("cut")}
	for i, mem := range m.g.Members {
		d[jen.Id(memberField(mem.Name))] = jen.Id(contract.GeneratedNames(m.members[i].Type).Snapshot).Values(
			jen.Dict{jen.Id("snap"): jen.Id("cut").Dot("Snap").Call(groupMemberIndex(i))})
	}
	return jen.Op("&").Id(m.names().Snapshot).Values(d)
}

func (m *groupModel) atCode() jen.Code {
	n := m.names()
	first := m.g.Members[0].Name
	return doc([]string{
		fmt.Sprintf("At returns the group as it was when %s made version v: a cut of every member, each rebuilt from its own checkpoints (a replayed member by running its steps again), which Rollback takes like a cut Snapshot took.%s A member whose history no longer holds its part of the cut answers state.ErrNotRetained, and no snapshot is left taken.", first, m.versionAtNote()),
		releaseDuty("snapshot"),
	}, "acquire").Func().Params(m.recv()).Id("At").Params(jen.Id("v").Add(st("Version"))).Params(jen.Op("*").Id(n.Snapshot), jen.Error()).Block(
		jen.List(jen.Id("cut"), jen.Err()).Op(":=").Add(m.gcall("At", jen.Id("v"))),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(m.cutValue(), jen.Nil()),
	)
}

// versionAtNote names the first member's VersionAt, where it has one.
func (m *groupModel) versionAtNote() string {
	if !appends(m.members[0]) {
		return ""
	}
	first := m.g.Members[0].Name
	return fmt.Sprintf(" %s().VersionAt(n) gives the version at which %s had n rows.", first, first)
}

func (m *groupModel) planCode() jen.Code {
	return doc([]string{
		"Plan explains how At would rebuild the cut at version v: the members' plans summed (deltas, replayed steps, bytes and the estimated cost). It rebuilds nothing.",
	}).Func().Params(m.recv()).Id("Plan").Params(jen.Id("v").Add(st("Version"))).Params(st("Plan"), jen.Error()).Block(
		jen.Return(m.gcall("Plan", jen.Id("v"))),
	)
}

func (m *groupModel) snapshotCode() jen.Code {
	n := m.names()
	return doc([]string{
		"Snapshot returns one consistent cut of the members: a snapshot of each, taken while no member can be written, so that no member write falls inside it. It copies no rows. When one member cannot be snapshotted, the snapshots already taken are released and the error returned.",
		releaseDuty("snapshot"),
	}, "acquire").Func().Params(m.recv()).Id("Snapshot").Params().Params(jen.Op("*").Id(n.Snapshot), jen.Error()).Block(
		append([]jen.Code{
			jen.Id("v").Op(":=").Id(slabName(m.g.Type, "snapshots")).Dot("New").Call(),
			jen.If(jen.Err().Op(":=").Add(m.gcall("SnapshotInto", jen.Op("&").Id("v").Dot("mem"))), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Nil(), jen.Err()),
			),
			jen.Id("v").Dot(cutField()).Op("=").Op("&").Id("v").Dot("mem"),
		}, append(m.memberSnaps("v"), jen.Return(jen.Id("v"), jen.Nil()))...)...,
	)
}

// memberSnaps sets the member snapshots of the cut handle v from its
// store cut.
func (m *groupModel) memberSnaps(v string) []jen.Code {
	var set []jen.Code
	for i, mem := range m.g.Members {
		set = append(set, jen.Id(v).Dot(memberField(mem.Name)).Dot("snap").Op("=").Id(v).Dot(cutField()).Dot("Snap").Call(groupMemberIndex(i)))
	}
	return set
}

func (m *groupModel) branchCode() jen.Code {
	n := m.names()
	p := "Branch returns a new group whose members are isolated branches of these members, taken as one consistent cut: writes to one group are invisible to the other, while the rows they share are stored once."
	if m.merge() {
		p += " A branch comes back by Merge."
	}
	return doc([]string{p, releaseDuty("branch")}, "acquire").Func().Params(m.recv()).Id("Branch").Params().Params(jen.Op("*").Id(n.Head), jen.Error()).Block(
		jen.List(jen.Id("b"), jen.Err()).Op(":=").Add(m.gcall("Branch")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Id(wrapName(m.g.Type)).Call(jen.Id("b")), jen.Nil()),
	)
}

func (m *groupModel) mergeCode() jen.Code {
	n := m.names()
	return doc([]string{
		"Merge fast-forwards every member to the matching member of child, a branch of the group, or none of them: every member is checked first, and when one has changed since the branch (state.ErrDiverged) or cannot move, no member moves. The child stays live and must still be released.",
	}, "mutates").Func().Params(m.recv()).Id("Merge").Params(jen.Id("child").Op("*").Id(n.Head)).Error().Block(
		jen.Return(m.gcall("Merge", jen.Id(groupOfName(m.g.Type)).Call(jen.Id("child")))),
	)
}

func (m *groupModel) rollbackCode() jen.Code {
	n := m.names()
	return doc([]string{
		"Rollback moves every member back to its part of the cut to, or none of them: every member is checked first (ancestry, owner, invalidation, eviction), and a cut that any member has invalidated answers state.ErrInvalidated with no member moved. Each member then applies its own descendants rule to the snapshots and branches taken after the cut.",
	}, "mutates").Func().Params(m.recv()).Id("Rollback").Params(jen.Id("to").Op("*").Id(n.Snapshot)).Error().Block(
		jen.Return(m.gcall("Rollback", jen.Id(cutOfName(m.g.Type)).Call(jen.Id("to")))),
	)
}

func (m *groupModel) statsCode() jen.Code {
	return doc([]string{
		"Stats reports the members' logical and physical bytes, summed; each member's own Stats has its version and rows.",
	}).Func().Params(m.recv()).Id("Stats").Params().Add(st("Stats")).Block(jen.Return(m.gcall("Stats")))
}

func (m *groupModel) releaseCode() jen.Code {
	p := "Release releases every member"
	if m.snapshot() {
		p += "; snapshots taken from the group or its members stay readable"
	}
	return doc([]string{p + ". Release is idempotent; every other call on a released group, or on its members, returns state.ErrReleased."}, "release").
		Func().Params(m.recv()).Id("Release").Params().Error().Block(jen.Return(m.gcall("Release")))
}

func (m *groupModel) snapDecl() jen.Code {
	n := m.names()
	fields := []jen.Code{jen.Id(cutField()).Op("*").Add(st("GroupSnap"))}
	for i, mem := range m.g.Members {
		fields = append(fields, jen.Id(memberField(mem.Name)).Id(contract.GeneratedNames(m.members[i].Type).Snapshot)) // by value: one allocation
	}
	if m.snapshot() {
		fields = append(fields, jen.Id("mem").Add(st("GroupSnap")).Comment("where "+cutField()+" points for a cut made by Snapshot"))
	}
	return doc([]string{
		fmt.Sprintf("%s is one consistent cut of %s group: an immutable snapshot of each member, taken together.", n.Snapshot, article(m.g.Type)),
	}, "snapshot").Type().Id(n.Snapshot).Struct(fields...)
}

func (m *groupModel) snapAccessors() []jen.Code {
	var out []jen.Code
	for i, mem := range m.g.Members {
		snap := contract.GeneratedNames(m.members[i].Type).Snapshot
		out = append(out, doc([]string{
			fmt.Sprintf("%s returns the cut's snapshot of member %s. It belongs to the cut: release the cut.", mem.Name, mem.Name),
		}, "view").Func().Params(m.snapRecv()).Id(mem.Name).Params().Op("*").Id(snap).Block(
			jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Return(jen.Nil())),
			jen.Return(jen.Op("&").Id("v").Dot(memberField(mem.Name))),
		))
	}
	return out
}

func (m *groupModel) snapReleaseCode() jen.Code {
	return doc([]string{
		"Release gives the cut's hold on the members' blocks back to the pool. Release is idempotent; every other method of a released cut's snapshots returns state.ErrReleased.",
	}, "release").Func().Params(m.snapRecv()).Id("Release").Params().Error().Block(
		jen.Return(jen.Id(cutOfName(m.g.Type)).Call(jen.Id("v")).Dot("Release").Call()),
	)
}

// generateGroups renders the file of every group in p.
func (p *Package) generateGroups(seen map[string]string) ([]File, error) {
	var out []File
	for _, g := range p.Contracts.Groups {
		name := contract.GeneratedNames(g.Type).File
		expr := p.fileConstraint(p.Fset.Position(g.Pos).Filename)
		if expr != nil {
			name = constraintFile(g.Type, expr)
		}
		if prev, ok := seen[name]; ok {
			return nil, fmt.Errorf("%s: %s and group %s would both be generated into %s; rename one", p.Path, prev, g.Type, name)
		}
		seen[name] = "group " + g.Type
		m, err := p.groupModel(g)
		if err != nil {
			return nil, err
		}
		src, err := renderGroup(m)
		if err != nil {
			return nil, fmt.Errorf("%s: rendering group %s: %v", p.Path, g.Type, err)
		}
		if expr != nil {
			src = bytes.Replace(src, []byte(Header+"\n"), []byte(Header+"\n\n//go:build "+expr.String()+"\n"), 1)
		}
		out = append(out, File{Name: name, Type: g.Type, Content: src})
	}
	return out, nil
}
