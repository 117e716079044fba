package main

import (
	"strings"
	"testing"
)

// TestFlags checks the flags statevet shares with stategen: -version, -V
// and -V=full, help and help NAME, and exit code 2 for bad usage.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a prefix of standard output
		stderr string // a substring of standard error
	}{
		{[]string{"-version"}, exitClean, "statevet v", ""},
		{[]string{"-V"}, exitClean, "statevet version v", ""},
		{[]string{"-V=full"}, exitClean, "", ""},
		{[]string{"help"}, exitClean, "statevet checks Go code", ""},
		{[]string{"help", "stgrowth"}, exitClean, "stgrowth: report state that may grow without a bound", ""},
		{[]string{"help", "nosuch"}, exitUsage, "", `statevet: no analyzer "nosuch"; run 'statevet help'`},
		{[]string{"help", "stgrowth", "nosuch"}, exitUsage, "stgrowth: ", `no analyzer "nosuch"`},
		{[]string{"-nosuchflag", "./..."}, exitUsage, "", "flag provided but not defined: -nosuchflag"},
		{nil, exitUsage, "", "Usage: statevet"},
	} {
		var stdout, stderr strings.Builder
		code := standalone(tc.args, suite, &stdout, &stderr)
		if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("statevet %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr ...%q...",
				strings.Join(tc.args, " "), code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
	var stdout strings.Builder
	standalone([]string{"-V=full"}, suite, &stdout, new(strings.Builder))
	if f := strings.Fields(stdout.String()); len(f) != 5 || f[1] != "version" || f[2] != "devel" || !strings.HasPrefix(f[4], "buildID=") {
		t.Errorf("-V=full printed %q, want PATH version devel gpustate-VERSION buildID=HASH", stdout.String())
	}
}
