package contract

import (
	"fmt"
)

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
		v, msg := cp.p.constInt(a.value, a.valPos)
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
