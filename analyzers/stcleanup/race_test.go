//go:build race

package stcleanup_test

// Under the race detector, the precision tests load a smaller subset.
func init() {
	precisionPkgs = []string{"archive/zip", "mime/multipart", "os/exec", "golang.org/x/tools/go/packages"}
}
