package gen

import "bytes"

// stubNote is the stub's explanation, after its build constraint.
const stubNote = `// This file held the handles stategen generated for a state type that no
// longer exists in this package. go generate reads every file of the
// package it listed before it ran stategen, so stategen does not remove a
// file while go generate runs: it leaves this stub, which no build
// includes, and removes it when it runs outside go generate
// (stategen ./...). It is safe to delete.
`

// Stub returns what stategen writes, while go generate runs, in place of
// a file it generated for a state type that no longer exists: the header,
// a build constraint that excludes the file from every build, and the
// package clause. So the package builds without the type's handles, and
// the go command still finds the file it listed.
func Stub(pkgName string) []byte {
	return []byte(Header + "\n\n//go:build ignore\n\n" + stubNote + "\npackage " + pkgName + "\n")
}

// IsStub reports whether content is a stub Stub wrote, for any package.
func IsStub(content []byte) bool {
	return bytes.HasPrefix(content, []byte(Header+"\n\n//go:build ignore\n\n"+stubNote+"\npackage "))
}
