package contract

import (
	"fmt"
	"strings"
)

// isWord reports whether s is a word: letters, digits, -, _ or .
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
