// Package gen turns state contracts into typed Go handles.
//
// Generation has two steps. The model comes first: Load type-checks packages
// with golang.org/x/tools/go/packages and takes their contracts from
// contract.ParsePackage, the parser and validation statevet uses, together
// with the Go types of each contract's fields; files that the current build
// excludes are loaded under tags that include them. Rendering comes second:
// Package.Generate writes, with github.com/dave/jennifer, one file per state
// type T, t_state.go (t_state_cuda.go, with its constraint, for a type
// declared under //go:build cuda), holding the API the contract allows and
// nothing more:
//
//   - TState, the live head, with NewTState, Read, ReadRows, ReadInto,
//     ReadRowsInto, ReadFields, Len, Version, Stats, Spans, RecordStream,
//     BlockTable, ReadAsync and Release always;
//     Bound without a window, Window and Oldest with one; Append,
//     AppendDevice and AppendAsync for append growth, Write and WriteDevice for mutable
//     growth; Snapshot with an immutable snapshot; Branch with isolated
//     branches; Merge with merge=fastforward; Rollback with a rollback line;
//     At and Plan with checkpoints, and VersionAt with checkpoints on
//     append growth; Step and StepHost with a replay line (replay.go);
//     NewTStateShared and AdoptPrefix with a share line; Prefetch with
//     optional retention.
//   - TSnapshot, an immutable version (generated unless snapshot none), with
//     Read, ReadRows, ReadInto, ReadRowsInto, ReadFields, ReadAsync,
//     Spans, RecordStream, BlockTable, Len, Version and Release; Oldest
//     with a window.
//   - TSpans, the device location of rows, one []device.Span per field.
//   - For a //state:group type G (group.go), GState with NewGState, one
//     accessor per member (its TState), Stats and Release; Snapshot,
//     Branch, Merge and Rollback when every member has them; At and
//     Plan when every member keeps a history (a checkpoint line); NewGStateShared
//     and AdoptPrefix when a member shares a prefix. GSnapshot, with one
//     accessor per member (its TSnapshot) and Release.
//
// A method the contract does not allow is not generated, so its misuse is a
// compile error. Every method carries the function directive statevet reads
// (acquire, release, appends, mutates, view) and a doc comment that states
// what the contract promises. The generated code only names types and
// converts batches (state.Bytes); every rule is kept by the store, which it
// calls through runtime/state/stateimpl (its types and constructors) and
// whose values users see as runtime/state's (Pool, Version, Stats, errors).
// Its helpers are named _T_layout, _T_read, _T_spans and the like, which
// no user writes; a user declaration of a generated name is a Clash. Every
// method reaches the store through _T_head(s) or _T_snap(v), which answer
// nil for a nil handle, so a call on one answers state.ErrReleased.
//
// Methods is the table of what is generated (name, directive, the contract
// line that makes it generated, doc comment), which the renderer and the
// report (package gen/report) share, as they share RulesOf, the contract
// stated in words, and Bytes, the one byte formatter of stategen's output.
// The package links neither runtime/state nor the device layer.
package gen
