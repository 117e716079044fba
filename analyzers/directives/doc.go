// Package directives defines an Analyzer that parses gpustate's //state:
// directives and shares them, as analysis facts, with the other statevet
// analyzers.
//
// # Analyzer directives
//
// directives: parse //state: directives and export them as facts
//
// The directives analyzer reports nothing itself. It parses the contracts of
// state types (//state:contract and the lines that complete it), snapshot
// types (//state:snapshot) and function directives (acquire, release, takes,
// mutates, appends, view, writes) with package contract, and exports each as
// a fact on its type, func or interface method, so that analyzers of
// importing packages see them. A package fact marks a package that declares
// directives or imports one that does: packages without it are skipped by
// every statevet analyzer. The //state:extern lines of a package, contracts
// for code the user cannot edit, are a package fact too, exported by it and
// by every package that imports it, directly or not: they hold in all of
// them, matched at call sites by the callee's full name.
//
// Its result, a *directives.Result, answers the questions the other
// analyzers ask: is this package active, what is the contract of this type,
// what directives does this func carry, is this a snapshot type.
package directives
