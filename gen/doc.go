// Package gen turns state contracts into typed Go handles.
//
// Generation has two steps. The model comes first: Load type-checks packages
// with golang.org/x/tools/go/packages and takes their contracts from
// contract.ParsePackage, the parser and validation statevet uses, together
// with the Go types of each contract's fields. Rendering comes second:
// Package.Generate writes, with github.com/dave/jennifer, one file per state
// type T, t_state.go, holding the API the contract allows and nothing more:
//
//   - TState, the live head, with NewTState, Read, Len, Bound, Version, Stats,
//     Spans and Release always; Append and AppendDevice for append growth,
//     Write and WriteDevice for mutable growth; Snapshot with an immutable
//     snapshot; Branch with isolated branches; Merge with merge=fastforward;
//     Rollback with a rollback line; At and Plan with checkpoints.
//   - TSnapshot, an immutable version (generated unless snapshot none).
//   - TSpans, the device location of rows, one []device.Span per field.
//
// A method the contract does not allow is not generated, so its misuse is a
// compile error. Every method carries the function directive statevet reads
// (acquire, release, appends, mutates, view) and a doc comment that states
// what the contract promises. The generated code only names types and
// converts batches (state.Bytes); every rule is kept by runtime/state.
//
// Report writes the contract of each type as Markdown, for reviewers.
package gen
