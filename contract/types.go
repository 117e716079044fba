package contract

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"
)

// typeDoc parses the directives in the doc comment of a type spec: a
// contract, a snapshot marker, or directives that do not belong there.
func (p *pkgParser) typeDoc(ts *ast.TypeSpec, doc *ast.CommentGroup) {
	name := ts.Name.Name
	start := len(p.out.Diagnostics)
	var dirs []*directive
	spaced := make(map[string]bool) // verbs of look-alike lines, reported already
	for _, c := range doc.List {
		if !strings.Contains(c.Text, "state:") {
			continue
		}
		if d, ok := parseDirective(c); ok {
			dirs = append(dirs, d)
			continue
		}
		if v := p.lookalike(c, name, typeVerbs); v != "" {
			spaced[v] = true
		}
	}
	if len(dirs) == 0 {
		// A look-alike //state:contract line was reported as such.
		return
	}
	var obj *types.TypeName
	if p.info != nil {
		obj, _ = p.info.Defs[ts.Name].(*types.TypeName)
	}
	for _, d := range dirs {
		if d.verb == "contract" {
			p.contract(ts, obj, dirs, d, spaced, start)
			return
		}
	}
	for _, d := range dirs {
		if d.verb == "group" {
			p.group(ts, obj, dirs, d, spaced, start)
			return
		}
	}
	p.snapshotType(ts, obj, dirs)
}

// snapshotType handles a type doc with directives but no //state:contract:
// a bare //state:snapshot marks a snapshot type; anything else is misplaced.
func (p *pkgParser) snapshotType(ts *ast.TypeSpec, obj *types.TypeName, dirs []*directive) {
	name := ts.Name.Name
	var snap *SnapshotType
	for _, d := range dirs {
		if p.claimsDurability(d, name, "type "+name) || p.externInDoc(d, name, "type "+name) {
			continue
		}
		switch {
		case d.verb == "snapshot":
			if snap != nil {
				p.errorf(name, d.pos, d.end, "repeated //state:snapshot on %s; keep one", name)
				continue
			}
			if len(d.args) > 0 || d.argErr != nil {
				p.errorf(name, d.pos, d.end,
					"//state:snapshot on %s takes no arguments outside a contract; write //state:snapshot alone to mark a snapshot type, or add //state:contract to make %s a state type", name, name)
				continue
			}
			snap = &SnapshotType{Type: name, Pos: d.pos, obj: obj}
		case isIn(d.verb, typeVerbs):
			p.errorf(name, d.pos, d.end,
				"//state:%s on %s is outside a contract; add //state:contract to the doc comment of %s", d.verb, name, name)
		case isIn(d.verb, funcVerbs):
			p.errorf(name, d.pos, d.end,
				"//state:%s applies to a func or method, not to type %s; move it to the doc comment of the func", d.verb, name)
		default:
			p.unknownVerb(d, name, "type "+name, typeVerbs)
		}
	}
	if snap != nil {
		p.out.Snapshots = append(p.out.Snapshots, snap)
	}
}

// contractParse holds the state of one contract while its lines are parsed.
type contractParse struct {
	p    *pkgParser
	c    *Contract
	name string
	seen map[string]*directive
	// spaced holds verbs already reported as look-alike or misspelt lines.
	spaced map[string]bool
	// misspelt holds the keys of the current line that were reported as
	// misspellings of a valid key, so that the key is not also missing.
	misspelt map[string]bool
	// bound is the bound=N or window=W argument of a valid growth line
	// with a number of rows, where the size check reports.
	bound *arg
	// shareKey is the key=FIELD argument of a share line, checked against
	// the fields once they are known.
	shareKey *arg
	// replayInput is the input=T argument of a replay line, checked
	// against the package's types once the lines are read.
	replayInput *arg
	// fieldNames are the names of the struct's fields, all of them;
	// elems the element types of those typeCheck accepted. typed says
	// whether they come from type information (else from the syntax).
	fieldNames []string
	elems      map[string]types.Type
	typed      bool
}

func (cp *contractParse) errorf(pos, end token.Pos, format string, args ...any) {
	cp.p.errorf(cp.name, pos, end, format, args...)
}

func (cp *contractParse) fix(pos, end token.Pos, fixes []Fix, format string, args ...any) {
	cp.p.report(StContract, cp.name, pos, end, fixes, format, args...)
}

// growthf reports a stgrowth diagnostic; it is kept only if the contract
// turns out valid.
func (cp *contractParse) growthf(pos, end token.Pos, format string, args ...any) {
	cp.p.report(StGrowth, cp.name, pos, end, nil, format, args...)
}

// contract parses and validates the contract of type ts.
// Diagnostics from index start on concern this type (look-alike lines
// included).
func (p *pkgParser) contract(ts *ast.TypeSpec, obj *types.TypeName, dirs []*directive, head *directive, spaced map[string]bool, start int) {
	name := ts.Name.Name
	cp := &contractParse{
		p:      p,
		c:      &Contract{Type: name, Pos: head.pos, obj: obj},
		name:   name,
		seen:   make(map[string]*directive),
		spaced: spaced,
	}
	for _, d := range dirs {
		cp.line(d)
	}
	cp.crossCheck(head, spaced)
	cp.typeCheck(ts, obj, head)
	cp.shareCheck()
	cp.replayCheck()
	cp.sizeCheck()

	c := cp.c
	c.Valid = true
	for _, d := range p.out.Diagnostics[start:] {
		if d.Analyzer == StContract {
			c.Valid = false
		}
	}
	if !c.Valid {
		// No cascades: a contract with stcontract errors gets no stgrowth findings.
		kept := p.out.Diagnostics[:start]
		for _, d := range p.out.Diagnostics[start:] {
			if d.Analyzer != StGrowth {
				kept = append(kept, d)
			}
		}
		p.out.Diagnostics = kept
	}
	p.out.Contracts = append(p.out.Contracts, c)
}

// line parses one directive of a contract: a line the contract accepts
// goes to the parser of its verb.
func (cp *contractParse) line(d *directive) {
	if cp.accept(d) {
		contractLines[d.verb](cp, d)
	}
}

// contractLines parses the arguments of each type verb.
var contractLines = map[string]func(*contractParse, *directive){
	"contract":   (*contractParse).purpose,
	"growth":     (*contractParse).growth,
	"owner":      (*contractParse).owner,
	"retention":  (*contractParse).retention,
	"snapshot":   (*contractParse).snapshot,
	"branch":     (*contractParse).branch,
	"rollback":   (*contractParse).rollback,
	"checkpoint": (*contractParse).checkpoint,
	"cleanup":    (*contractParse).cleanup,
	"block":      (*contractParse).block,
	"share":      (*contractParse).share,
	"replay":     (*contractParse).replay,
	"group":      (*contractParse).groupInContract,
}

// groupInContract reports a //state:group line in a contract: a type is a
// state type or a group of state types, not both.
func (cp *contractParse) groupInContract(d *directive) {
	cp.errorf(d.pos, d.end,
		"//state:group on state type %s: a type is a state type or a group of state types, not both; remove the group line, or declare the group as its own struct type with one field per member", cp.name)
}

// accept reports what keeps d from being a line of the contract (a claim of
// durability, a func verb, an unknown verb, a repeat, a malformed argument)
// and returns whether its arguments are to be parsed.
func (cp *contractParse) accept(d *directive) bool {
	name := cp.name
	if cp.p.externInDoc(d, name, "state type "+name) {
		return false
	}
	if cp.p.claimsDurability(d, name, "the contract of "+name) {
		cp.spaced[d.verb] = true // reported at the line: not missing as well
		return false
	}
	switch {
	case isIn(d.verb, funcVerbs):
		cp.errorf(d.pos, d.end,
			"//state:%s applies to a func or method, not to state type %s; move it to the doc comment of the func", d.verb, name)
		return false
	case !isIn(d.verb, typeVerbs):
		if s := cp.p.unknownVerb(d, name, "state type "+name, typeVerbs); s != "" {
			cp.spaced[s] = true // reported as a misspelling: not missing as well
		}
		return false
	}
	if prev := cp.seen[d.verb]; prev != nil {
		cp.errorf(d.pos, d.end,
			"repeated //state:%s in the contract of %s (first at line %d); keep one", d.verb, name, cp.p.line(prev.pos))
		return false
	}
	cp.seen[d.verb] = d
	if d.argErr != nil {
		cp.errorf(d.argErr.pos, d.argErr.end, "malformed argument in //state:%s of %s: %s", d.verb, name, d.argErr.msg)
		return false
	}
	return true
}

// purpose parses //state:contract [purpose="..."].
func (cp *contractParse) purpose(d *directive) {
	words, kv := cp.split(d, "purpose")
	cp.noWords(d, words, `purpose="..."`)
	if a, ok := kv["purpose"]; ok {
		cp.c.Purpose = a.value
	}
}

// owner parses //state:owner KIND.
func (cp *contractParse) owner(d *directive) {
	name := cp.name
	words, _ := cp.split(d)
	switch {
	case len(words) == 0:
		cp.errorf(d.pos, d.end, "//state:owner of %s needs an owner kind; write e.g. //state:owner session", name)
	case len(words) > 1:
		cp.errorf(words[1].pos, words[len(words)-1].end, "//state:owner of %s takes one owner kind; remove %s", name, quote(words[1].value))
	case !isWord(words[0].value):
		cp.errorf(words[0].pos, words[0].end, "owner kind %s of %s is not a word; use letters, digits, - or _ (e.g. session)", quote(words[0].value), name)
	default:
		cp.c.Owner = words[0].value
	}
}

// retention parses //state:retention mandatory|optional|reconstructable.
func (cp *contractParse) retention(d *directive) {
	words, _ := cp.split(d)
	switch cp.enumWord(d, words, "a retention", "mandatory", "optional", "reconstructable") {
	case "optional":
		cp.c.Retention = RetentionOptional
	case "reconstructable":
		cp.c.Retention = RetentionReconstructable
	}
}

// snapshot parses //state:snapshot immutable|none.
func (cp *contractParse) snapshot(d *directive) {
	words, _ := cp.split(d)
	if cp.enumWord(d, words, "a snapshot mode", "immutable", "none") == "none" {
		cp.c.Snapshot = SnapshotNone
	}
}

// rollback parses //state:rollback descendants=invalidate|keep.
func (cp *contractParse) rollback(d *directive) {
	words, kv := cp.split(d, "descendants")
	cp.noWords(d, words, "descendants=invalidate or descendants=keep")
	cp.c.Rollback = true
	a, ok := kv["descendants"]
	if !ok && cp.misspelt["descendants"] {
		return
	}
	if !ok {
		cp.errorf(d.pos, d.end,
			"//state:rollback of %s needs descendants=invalidate or descendants=keep: say what happens to snapshots and branches taken after the rollback target", cp.name)
		return
	}
	if cp.enumValue(d, a, "invalidate", "keep") == "keep" {
		cp.c.Descendants = DescendantsKeep
	}
}

// cleanup parses //state:cleanup on=EVENT.
func (cp *contractParse) cleanup(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "on")
	cp.noWords(d, words, "on=EVENT")
	a, ok := kv["on"]
	switch {
	case !ok && cp.misspelt["on"]:
	case !ok:
		cp.errorf(d.pos, d.end, "//state:cleanup of %s needs on=EVENT naming the event that ends the state (e.g. on=session-end)", name)
	case !isWord(a.value):
		cp.errorf(a.valPos, a.end, "cleanup event %s of %s is not a word; use letters, digits, - or _", quote(a.value), name)
	default:
		cp.c.Cleanup = a.value
	}
}

func (p *pkgParser) line(pos token.Pos) int {
	if p.fset == nil || !pos.IsValid() {
		return 0
	}
	return p.fset.Position(pos).Line
}

// crossCheck reports missing directives and contradictions between lines.
func (cp *contractParse) crossCheck(head *directive, spaced map[string]bool) {
	name, c := cp.name, cp.c
	if cp.seen["growth"] == nil && !spaced["growth"] {
		cp.errorf(head.pos, head.end,
			"state type %s has no //state:growth line; add //state:growth append bound=N or //state:growth mutable bound=N", name)
	}
	if cp.seen["owner"] == nil && !spaced["owner"] {
		cp.errorf(head.pos, head.end,
			"state type %s has no //state:owner line; add //state:owner KIND (session, request, step, process...)", name)
	}
	if d := cp.seen["retention"]; d != nil && c.Retention == RetentionReconstructable && cp.seen["checkpoint"] == nil && !spaced["checkpoint"] {
		cp.errorf(d.pos, d.end,
			"reconstructable state %s needs a //state:checkpoint line to be rebuilt from; add //state:checkpoint every=N keep=K or use retention mandatory", name)
	}
	if d := cp.seen["checkpoint"]; d != nil && c.Window > 0 {
		cp.errorf(d.pos, d.end,
			"//state:checkpoint of %s cannot keep the history of a window: rows below the window expire and their blocks go back to the pool; remove the checkpoint line or use bound=N", name)
	}
	cp.shareCrossCheck()
	cp.replayCrossCheck()
	if c.Snapshot == SnapshotNone && cp.seen["snapshot"] != nil {
		if d := cp.seen["rollback"]; d != nil {
			cp.errorf(d.pos, d.end,
				"//state:rollback of %s needs snapshots (Rollback takes one), but the contract says snapshot none; remove the rollback line or use snapshot immutable", name)
		}
		if d := cp.seen["checkpoint"]; d != nil {
			cp.errorf(d.pos, d.end,
				"//state:checkpoint of %s needs snapshots (At returns one), but the contract says snapshot none; remove the checkpoint line or use snapshot immutable", name)
		}
	}
}
