package contract

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// directive is one //state: comment line, tokenized.
type directive struct {
	verb             string
	pos, end         token.Pos // the whole comment
	verbPos, verbEnd token.Pos
	args             []arg
	argErr           *argError // the first malformed argument, if any
}

// arg is one argument of a directive: a bare word or key=value.
type arg struct {
	key      string    // "" for a bare word
	value    string    // the word, or the (unquoted) value
	pos, end token.Pos // the whole token
	keyEnd   token.Pos // end of the key (valid with a key)
	valPos   token.Pos // start of the value as written
	quoted   bool      // the value was a Go string literal
}

type argError struct {
	pos, end token.Pos
	msg      string
}

// parseDirective recognises a //state: line with ast.ParseDirective and
// tokenizes its arguments. ok is false when c is not a state directive.
func parseDirective(c *ast.Comment) (d *directive, ok bool) {
	dir, ok := ast.ParseDirective(c.Slash, c.Text)
	if !ok || dir.Tool != "state" {
		return nil, false
	}
	verbPos := c.Slash + token.Pos(len("//state:"))
	d = &directive{
		verb:    dir.Name,
		pos:     c.Slash,
		end:     c.End(),
		verbPos: verbPos,
		verbEnd: verbPos + token.Pos(len(dir.Name)),
	}
	d.args, d.argErr = tokenize(dir.Args, dir.ArgsPos)
	return d, true
}

// tokenize splits the argument string of a directive into words and
// key=value pairs. Values may be Go string literals ("a b", `a b`). A token
// starting with // ends the arguments: the rest of the line is a remark.
func tokenize(s string, base token.Pos) ([]arg, *argError) {
	var args []arg
	i := 0
	for {
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		if i >= len(s) || strings.HasPrefix(s[i:], "//") {
			return args, nil
		}
		start := i
		at := func(j int) token.Pos { return base + token.Pos(j) }
		if s[i] == '"' || s[i] == '`' {
			end := tokenEnd(s, i)
			return args, &argError{at(start), at(end), "a quoted value needs a key (key=\"...\")"}
		}
		// Scan a word or a key up to '=' or a space.
		j := i
		for j < len(s) && s[j] != '=' {
			r, n := utf8.DecodeRuneInString(s[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += n
		}
		if j >= len(s) || s[j] != '=' {
			args = append(args, arg{value: s[i:j], pos: at(i), end: at(j), valPos: at(i)})
			i = j
			continue
		}
		key := s[i:j]
		if key == "" {
			end := tokenEnd(s, i)
			return args, &argError{at(start), at(end), "missing key before ="}
		}
		a := arg{key: key, pos: at(i), keyEnd: at(j), valPos: at(j + 1)}
		j++ // '='
		if j < len(s) && (s[j] == '"' || s[j] == '`') {
			q, err := strconv.QuotedPrefix(s[j:])
			if err != nil {
				return args, &argError{at(start), at(len(s)), "unterminated or malformed quoted value for " + key}
			}
			v, err := strconv.Unquote(q)
			if err != nil {
				return args, &argError{at(start), at(j + len(q)), "malformed quoted value for " + key}
			}
			j += len(q)
			if j < len(s) {
				if r, _ := utf8.DecodeRuneInString(s[j:]); !unicode.IsSpace(r) {
					return args, &argError{at(start), at(tokenEnd(s, j)), "a quoted value must be followed by a space"}
				}
			}
			a.value, a.quoted = v, true
		} else {
			k := j
			for k < len(s) {
				r, n := utf8.DecodeRuneInString(s[k:])
				if unicode.IsSpace(r) {
					break
				}
				k += n
			}
			a.value = s[j:k]
			j = k
		}
		a.end = at(j)
		args = append(args, a)
		i = j
	}
}

// tokenEnd returns the offset of the first space at or after i.
func tokenEnd(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// lookalike reports whether c looks like a state directive but is not one:
// "// state:growth" (a space after //), "//state:Growth" (not a valid
// directive name) or "/*state:growth*/". It returns the verb as written and
// its offset in c.Text.
func lookalike(text string) (verb string, off int, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(text, "//"):
		rest = text[2:]
	case strings.HasPrefix(text, "/*"):
		rest = strings.TrimSuffix(text[2:], "*/")
	default:
		return "", 0, false
	}
	trimmed := strings.TrimLeft(rest, " \t")
	if !strings.HasPrefix(trimmed, "state:") {
		return "", 0, false
	}
	off = len(text) - len(rest) + (len(rest) - len(trimmed)) + len("state:")
	w := text[off:]
	n := 0
	for n < len(w) && (isLetter(w[n]) || w[n] == '-' || w[n] == '_' || '0' <= w[n] && w[n] <= '9') {
		n++
	}
	if n == 0 || !isLetter(w[0]) {
		return "", 0, false
	}
	return w[:n], off, true
}

func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

// mentionsState is the fast path: whether any comment of f contains "state:".
func mentionsState(f *ast.File) bool {
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.Contains(c.Text, "state:") {
				return true
			}
		}
	}
	return false
}
