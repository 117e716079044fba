// Package codeshape holds tests of the repository's shape. No hand-written
// Go file over 800 lines and no function over 80, tests, testdata and
// generated code aside: long files and functions hide the steps a reader
// needs to see. Imports flow one way (the nevers of docs/INTERNALS.md), no
// analyzer that reports findings imports another, and the rule naming
// generated code is spelt once, in contract.GeneratedNames. A comment or
// page that cites a section of a page (docs/GUIDE.md, "Owners") cites one
// that exists. CI (.ci/run) runs what make demo checks: make generated and
// make demo.
package codeshape
