package contract

import (
	"fmt"
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
		if spaced["contract"] {
			// The whole contract is lost; the look-alike report says why.
			return
		}
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
	p.snapshotType(ts, obj, dirs)
}

// snapshotType handles a type doc with directives but no //state:contract:
// a bare //state:snapshot marks a snapshot type; anything else is misplaced.
func (p *pkgParser) snapshotType(ts *ast.TypeSpec, obj *types.TypeName, dirs []*directive) {
	name := ts.Name.Name
	var snap *SnapshotType
	for _, d := range dirs {
		if p.claimsDurability(d, name, "type "+name) {
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

// line parses one directive of a contract.
func (cp *contractParse) line(d *directive) {
	name := cp.name
	if cp.p.claimsDurability(d, name, "the contract of "+name) {
		return
	}
	switch {
	case isIn(d.verb, funcVerbs):
		cp.errorf(d.pos, d.end,
			"//state:%s applies to a func or method, not to state type %s; move it to the doc comment of the func", d.verb, name)
		return
	case !isIn(d.verb, typeVerbs):
		if s := cp.p.unknownVerb(d, name, "state type "+name, typeVerbs); s != "" {
			cp.spaced[s] = true // reported as a misspelling: not missing as well
		}
		return
	}
	if prev := cp.seen[d.verb]; prev != nil {
		cp.errorf(d.pos, d.end,
			"repeated //state:%s in the contract of %s (first at line %d); keep one", d.verb, name, cp.p.line(prev.pos))
		return
	}
	cp.seen[d.verb] = d
	if d.argErr != nil {
		cp.errorf(d.argErr.pos, d.argErr.end, "malformed argument in //state:%s of %s: %s", d.verb, name, d.argErr.msg)
		return
	}
	switch d.verb {
	case "contract":
		words, kv := cp.split(d, "purpose")
		cp.noWords(d, words, `purpose="..."`)
		if a, ok := kv["purpose"]; ok {
			cp.c.Purpose = a.value
		}
	case "growth":
		cp.growth(d)
	case "owner":
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
	case "retention":
		words, _ := cp.split(d)
		switch cp.enumWord(d, words, "a retention", "mandatory", "optional", "reconstructable") {
		case "optional":
			cp.c.Retention = RetentionOptional
		case "reconstructable":
			cp.c.Retention = RetentionReconstructable
		}
	case "snapshot":
		words, _ := cp.split(d)
		if cp.enumWord(d, words, "a snapshot mode", "immutable", "none") == "none" {
			cp.c.Snapshot = SnapshotNone
		}
	case "branch":
		cp.branch(d)
	case "rollback":
		words, kv := cp.split(d, "descendants")
		cp.noWords(d, words, "descendants=invalidate or descendants=keep")
		cp.c.Rollback = true
		a, ok := kv["descendants"]
		if !ok && cp.misspelt["descendants"] {
			break
		}
		if !ok {
			cp.errorf(d.pos, d.end,
				"//state:rollback of %s needs descendants=invalidate or descendants=keep: say what happens to snapshots and branches taken after the rollback target", name)
			break
		}
		if cp.enumValue(d, a, "invalidate", "keep") == "keep" {
			cp.c.Descendants = DescendantsKeep
		}
	case "checkpoint":
		cp.checkpoint(d)
	case "cleanup":
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
}

func (p *pkgParser) line(pos token.Pos) int {
	if p.fset == nil || !pos.IsValid() {
		return 0
	}
	return p.fset.Position(pos).Line
}

func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// split separates the words of d from its key=value arguments, reporting
// keys the verb does not accept (with the nearest valid one) and repeated
// keys.
func (cp *contractParse) split(d *directive, keys ...string) (words []arg, kv map[string]arg) {
	kv = make(map[string]arg)
	cp.misspelt = make(map[string]bool)
	for _, a := range d.args {
		if a.key == "" {
			words = append(words, a)
			continue
		}
		if !isIn(a.key, keys) {
			if len(keys) == 0 {
				cp.errorf(a.pos, a.end, "//state:%s of %s takes no key=value arguments; remove %s", d.verb, cp.name, quote(a.key+"="+a.value))
				continue
			}
			if s := nearest(a.key, keys); s != "" {
				cp.misspelt[s] = true
				cp.fix(a.pos, a.keyEnd, []Fix{{
					Message: fmt.Sprintf("replace %s with %s", a.key, s),
					Edits:   []Edit{{Pos: a.pos, End: a.keyEnd, NewText: s}},
				}}, "unknown key %s in //state:%s of %s; did you mean %s?", a.key, d.verb, cp.name, s)
				continue
			}
			cp.errorf(a.pos, a.keyEnd, "unknown key %s in //state:%s of %s; valid keys are %s", a.key, d.verb, cp.name, strings.Join(keys, ", "))
			continue
		}
		if _, dup := kv[a.key]; dup {
			cp.errorf(a.pos, a.end, "repeated key %s in //state:%s of %s; keep one", a.key, d.verb, cp.name)
			continue
		}
		kv[a.key] = a
	}
	return words, kv
}

// noWords reports bare words in a directive that takes only keys.
func (cp *contractParse) noWords(d *directive, words []arg, want string) {
	for _, w := range words {
		cp.errorf(w.pos, w.end, "unexpected argument %s in //state:%s of %s; write %s", quote(w.value), d.verb, cp.name, want)
	}
}

// enumWord checks that d has exactly one word, one of allowed, and returns it
// ("" after a diagnostic).
func (cp *contractParse) enumWord(d *directive, words []arg, what string, allowed ...string) string {
	if len(words) == 0 {
		cp.errorf(d.pos, d.end, "//state:%s of %s needs %s: %s", d.verb, cp.name, what, strings.Join(allowed, " or "))
		return ""
	}
	for _, w := range words[1:] {
		cp.errorf(w.pos, w.end, "//state:%s of %s takes one word; remove %s (write a value with spaces as key=\"...\")", d.verb, cp.name, quote(w.value))
	}
	w := words[0]
	if isIn(w.value, allowed) {
		return w.value
	}
	cp.badValue(d, w, "", allowed)
	return ""
}

// enumValue checks the value of a key against allowed and returns it ("" after a diagnostic).
func (cp *contractParse) enumValue(d *directive, a arg, allowed ...string) string {
	if isIn(a.value, allowed) && !a.quoted {
		return a.value
	}
	cp.badValue(d, a, a.key, allowed)
	return ""
}

func (cp *contractParse) badValue(d *directive, a arg, key string, allowed []string) {
	where := "//state:" + d.verb
	if key != "" {
		where = key + " in " + where
	}
	if s := nearest(a.value, allowed); s != "" && !a.quoted {
		cp.fix(a.valPos, a.end, []Fix{{
			Message: fmt.Sprintf("replace %s with %s", a.value, s),
			Edits:   []Edit{{Pos: a.valPos, End: a.end, NewText: s}},
		}}, "bad value %s for %s of %s; did you mean %s?", quote(a.value), where, cp.name, s)
		return
	}
	cp.errorf(a.valPos, a.end, "bad value %s for %s of %s; use %s", quote(a.value), where, cp.name, strings.Join(allowed, " or "))
}

// growth parses //state:growth append|mutable bound=B [reason="..."].
func (cp *contractParse) growth(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "bound", "reason")
	law := cp.enumWord(d, words, "a growth law", "append", "mutable")
	switch law {
	case "append":
		cp.c.Growth = GrowthAppend
	case "mutable":
		cp.c.Growth = GrowthMutable
	default:
		return
	}
	bound, hasBound := kv["bound"]
	reason, hasReason := kv["reason"]
	unbounded := hasBound && bound.value == "unbounded" && !bound.quoted
	switch {
	case !hasBound && cp.misspelt["bound"]:
	case !hasBound && law == "append":
		cp.growthf(d.pos, d.end,
			"append growth of %s has no bound; add bound=N (the most rows it may hold) or bound=unbounded reason=\"...\" to grow without limit", name)
	case !hasBound:
		cp.errorf(d.pos, d.end, "mutable growth of %s needs bound=N: a mutable state has exactly N rows", name)
	case unbounded && law == "mutable":
		cp.errorf(bound.valPos, bound.end, "mutable growth of %s cannot be unbounded: a mutable state has exactly N rows; write bound=N", name)
	case unbounded:
		cp.c.Unbounded = true
		if !hasReason || strings.TrimSpace(reason.value) == "" {
			cp.growthf(d.pos, d.end,
				"bound=unbounded on %s has no reason; add reason=\"...\" saying why it may grow without limit, or give bound=N", name)
		} else {
			cp.c.UnboundedReason = reason.value
		}
	default:
		v, msg := cp.p.constInt(bound.value)
		switch {
		case msg != "":
			cp.errorf(bound.valPos, bound.end, "bound %s of %s %s; write a positive integer constant (4096, MaxRows, 4*K) or unbounded", quote(bound.value), name, msg)
		case v <= 0:
			cp.errorf(bound.valPos, bound.end, "bound %s of %s is %d; a bound must be a positive number of rows", quote(bound.value), name, v)
		default:
			cp.c.Bound = v
		}
	}
	if hasReason && hasBound && !unbounded {
		cp.errorf(reason.pos, reason.end, "reason applies only to bound=unbounded in the growth of %s; remove it", name)
	}
	if hasReason && !hasBound && law == "append" {
		cp.errorf(reason.pos, reason.end, "reason without bound=unbounded in the growth of %s; write bound=unbounded reason=\"...\" or bound=N", name)
	}
}

// branch parses //state:branch isolated merge=M or //state:branch none.
func (cp *contractParse) branch(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "merge")
	mode := cp.enumWord(d, words, "a branch mode", "isolated", "none")
	merge, hasMerge := kv["merge"]
	switch mode {
	case "isolated":
		cp.c.Branch = BranchIsolated
		if !hasMerge && cp.misspelt["merge"] {
			return
		}
		if !hasMerge {
			end := d.verbEnd
			for _, a := range d.args {
				end = a.end
			}
			cp.fix(d.pos, d.end, []Fix{{
				Message: "add merge=unsupported",
				Edits:   []Edit{{Pos: end, End: end, NewText: " merge=unsupported"}},
			}}, "isolated branches of %s need a merge decision; add merge=unsupported or merge=fastforward", name)
			return
		}
		switch cp.enumValue(d, merge, "unsupported", "fastforward") {
		case "unsupported":
			cp.c.Merge = MergeUnsupported
		case "fastforward":
			cp.c.Merge = MergeFastforward
		}
	case "none":
		if hasMerge {
			cp.errorf(merge.pos, merge.end, "merge applies only to isolated branches, and %s has branch none; remove merge or write //state:branch isolated", name)
		}
	}
}

// checkpoint parses //state:checkpoint every=N keep=K or
// //state:checkpoint budget=BYTES keep=K: exactly one of every and budget
// spaces the checkpoints.
func (cp *contractParse) checkpoint(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "every", "keep", "budget")
	cp.noWords(d, words, "every=N keep=K or budget=BYTES keep=K")
	ck := &Checkpoint{}
	positive := func(key string) (int64, bool) {
		a, ok := kv[key]
		if !ok {
			return 0, false
		}
		v, msg := cp.p.constInt(a.value)
		if msg == "" && v <= 0 {
			msg = fmt.Sprintf("is %d", v)
		}
		if msg == "" && key != "budget" && v > 1<<31-1 {
			msg = "is too large"
		}
		if msg != "" {
			cp.errorf(a.valPos, a.end, "%s=%s in //state:checkpoint of %s %s; write a positive integer constant", key, quote(a.value), name, msg)
			return 0, false
		}
		return v, true
	}
	every, hasEvery := kv["every"]
	budget, hasBudget := kv["budget"]
	switch {
	case hasEvery && hasBudget:
		// Report at the second of the two; the first one stands.
		second, first := budget, "every"
		if second.pos < every.pos {
			second, first = every, "budget"
		}
		cp.errorf(second.pos, second.end,
			"//state:checkpoint of %s has both every and budget; choose one: every=N for a fixed spacing of N versions, budget=BYTES for a spacing in bytes replayed (a checkpoint whenever the deltas written since the last one reach BYTES)", name)
		if first == "every" {
			if v, ok := positive("every"); ok {
				ck.Every = int(v)
			}
		} else if v, ok := positive("budget"); ok {
			ck.Budget = v
		}
	case hasEvery:
		if v, ok := positive("every"); ok {
			ck.Every = int(v)
		}
	case hasBudget:
		if v, ok := positive("budget"); ok {
			ck.Budget = v
		}
	case !cp.misspelt["every"] && !cp.misspelt["budget"]:
		cp.errorf(d.pos, d.end,
			"//state:checkpoint of %s needs every=N or budget=BYTES: a checkpoint every N versions, or whenever the deltas written since the last one reach BYTES", name)
	}
	_, hasKeep := kv["keep"]
	switch {
	case hasKeep:
		if v, ok := positive("keep"); ok {
			ck.Keep = int(v)
		}
	case !cp.misspelt["keep"]:
		cp.growthf(d.pos, d.end, "checkpoint history of %s has no keep, so it grows without limit; add keep=K to retain at most K checkpoints", name)
	}
	cp.c.Checkpoint = ck
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
	if d := cp.seen["retention"]; d != nil && c.Retention == RetentionReconstructable && cp.seen["checkpoint"] == nil {
		cp.errorf(d.pos, d.end,
			"reconstructable state %s needs a //state:checkpoint line to be rebuilt from; add //state:checkpoint every=N keep=K or use retention mandatory", name)
	}
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

// typeCheck checks that the state type is a concrete struct type and
// computes its fields.
func (cp *contractParse) typeCheck(ts *ast.TypeSpec, obj *types.TypeName, head *directive) {
	name := cp.name
	if ts.Assign.IsValid() {
		cp.errorf(head.pos, head.end, "state type %s is an alias; declare it as a defined struct type (type %s struct{...})", name, name)
		return
	}
	if ts.TypeParams != nil && len(ts.TypeParams.List) > 0 {
		cp.errorf(head.pos, head.end, "state type %s has type parameters; a state type must be a concrete struct type (declare one type per element type)", name)
		return
	}
	if obj == nil {
		// No type information: check the syntax only.
		if _, ok := ts.Type.(*ast.StructType); !ok {
			cp.errorf(head.pos, head.end, "state type %s is not a struct type; declare it as type %s struct{ Field []Elem; ... }", name, name)
		}
		return
	}
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		cp.errorf(head.pos, head.end, "state type %s is not a struct type; declare it as type %s struct{ Field []Elem; ... }", name, name)
		return
	}
	if st.NumFields() == 0 {
		cp.errorf(head.pos, head.end, "state type %s has no fields; add one slice field per column (e.g. Keys []float32)", name)
		return
	}
	for i := 0; i < st.NumFields(); i++ {
		cp.field(st.Field(i), st.Tag(i), head)
	}
}
