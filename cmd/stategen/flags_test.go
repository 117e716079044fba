package main

import (
	"strings"
	"testing"
)

// TestFlags checks the flags stategen shares with statevet: -version,
// -V and -V=full, help and help NAME, and exit code 2 for bad usage.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a prefix of standard output
		stderr string // a substring of standard error
	}{
		{[]string{"-version"}, 0, "stategen v", ""},
		{[]string{"-V"}, 0, "stategen version v", ""},
		{[]string{"-V=full"}, 0, "", ""},
		{[]string{"-V=half"}, 2, "", "want -V or -V=full"},
		{[]string{"help"}, 0, "usage: stategen", ""},
		{[]string{"help", "report"}, 0, "-report file: write the contract of every state type", ""},
		{[]string{"help", "-check"}, 0, "-check: write nothing", ""},
		{[]string{"help", "nosuch"}, 2, "", `stategen: no flag "nosuch"; run 'stategen help'`},
		{[]string{"-nosuchflag"}, 2, "", "flag provided but not defined: -nosuchflag"},
	} {
		code, stdout, stderr := stategenOut(t, tc.args...)
		if code != tc.code || !strings.HasPrefix(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("stategen %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr ...%q...",
				strings.Join(tc.args, " "), code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	// -V=full is the line go vet asks of a vet tool, as statevet prints it.
	_, stdout, _ := stategenOut(t, "-V=full")
	if f := strings.Fields(stdout); len(f) != 5 || f[1] != "version" || f[2] != "devel" ||
		!strings.HasPrefix(f[3], "gpustate-v") || !strings.HasPrefix(f[4], "buildID=") {
		t.Errorf("-V=full printed %q, want PATH version devel gpustate-VERSION buildID=HASH", stdout)
	}
}

// TestLoadErrorPrefix checks that an error without a position is printed
// as the go command prints it, without the "-: " of packages.Error.
func TestLoadErrorPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	newModule(t, map[string]string{"cache/cache.go": cacheSrc})
	code, stderr := stategen(t, "nosuchpkg")
	if code != 1 || !strings.HasPrefix(stderr, "stategen: package nosuchpkg is not in std") {
		t.Errorf("a package that does not exist: exit %d, stderr %q; want 1 and stategen: package nosuchpkg is not in std ...", code, stderr)
	}
}
