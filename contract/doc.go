// Package contract is the directive language of gpustate: the one parser of
// //state: comments, used by statevet's analyzers and by stategen.
//
// A state type is a named struct type whose doc comment holds
// //state:contract; further type directives (growth, owner, retention,
// snapshot, branch, rollback, checkpoint, cleanup, block, share) complete its
// contract.
// Function directives (acquire, release, takes, mutates, appends, view,
// writes) on funcs and methods carry ownership and aliasing facts, and a bare
// //state:snapshot marks a type whose values are immutable.
//
// Lines are recognised with [go/ast.ParseDirective]; the argument string is
// tokenized here into words and key=value pairs whose values may be Go string
// literals (purpose="a quoted value"), each with its position. A token that
// starts with // ends the arguments: the rest of the line is a remark.
//
// [ParsePackage] parses and validates a type-checked package. It never
// panics: every problem, from a misspelt verb to a contradiction between two
// lines, is a [Diagnostic] at the position of what is wrong, whose message
// names the type and what to write instead. See docs/DIRECTIVES.md for the
// language reference.
package contract
