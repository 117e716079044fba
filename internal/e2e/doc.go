// Package e2e holds the end-to-end test of the first hour with gpustate: in a
// new module outside the repository, set up the tools the way the README
// says, write the README's program and the code of docs/GUIDE.md, generate,
// build, vet and run it. The code and commands come from the documents
// themselves, so they cannot drift from what is tested.
package e2e
