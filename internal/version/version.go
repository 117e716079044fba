// Package version is the one version of gpustate that its binaries report:
// -version and -V=full of stategen and statevet (go vet reads statevet's)
// and the driver of statevet's SARIF logs.
package version

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// Module is the path of the gpustate module.
const Module = "github.com/gpustate/gpustate"

// Release is the version of this source tree: the newest heading of
// CHANGELOG.md. A binary built from a module version the go command
// downloaded reports that version instead (see String).
const Release = "v0.1.0"

// String returns the version of gpustate this binary was built from: the
// module version the go command recorded (go install ...@v0.1.0, or the
// version a tool directive resolved), else Release with "-devel" appended,
// for a checkout, a replace directive or a build without module
// information.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Release + "-devel"
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo finds gpustate's version in bi: the main module's when
// gpustate is the main module, else the dependency's, unless replaced by a
// directory (which has no version).
func fromBuildInfo(bi *debug.BuildInfo) string {
	mods := []*debug.Module{&bi.Main}
	mods = append(mods, bi.Deps...)
	for _, m := range mods {
		if m == nil || m.Path != Module {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if isVersion(m.Version) {
			return m.Version
		}
	}
	return Release + "-devel"
}

// isVersion reports whether v is a module version the go command resolved,
// rather than "(devel)", "" or the v0.0.0 that a requirement replaced by a
// directory names.
func isVersion(v string) bool {
	return len(v) > 1 && v[0] == 'v' && v != "v0.0.0"
}

// Flags are the version flags both commands take, one set for both:
// -version prints "NAME VERSION"; -V=full prints the line the go command
// asks of a vet tool (and keys its cache on), "PATH version devel
// gpustate-VERSION buildID=HASH" with the hash of the executable; -V alone
// prints "NAME version VERSION", as the go toolchain's commands do.
type Flags struct {
	version bool
	v       vFlag
}

// Register adds -version and -V to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.Var(&f.v, "V", "print the version and exit (-V=full: with the executable's hash, as go vet asks of a vet tool)")
}

// Print prints the version a flag asked for, if any, and reports whether
// one did.
func (f *Flags) Print(w io.Writer, name string) (bool, error) {
	switch {
	case f.v == "full":
		return true, Full(w)
	case f.v != "":
		_, err := fmt.Fprintf(w, "%s version %s\n", name, String())
		return true, err
	case f.version:
		_, err := fmt.Fprintf(w, "%s %s\n", name, String())
		return true, err
	}
	return false, nil
}

// vFlag is -V, -V=full or -V=true: a boolean flag with a second value.
type vFlag string

func (v *vFlag) String() string   { return string(*v) }
func (v *vFlag) IsBoolFlag() bool { return true }

func (v *vFlag) Set(s string) error {
	switch s {
	case "full", "true":
		*v = vFlag(s)
	case "false":
		*v = ""
	default:
		return fmt.Errorf("want -V or -V=full, have -V=%s", s)
	}
	return nil
}

// Full prints the -V=full line: "PATH version devel gpustate-VERSION
// buildID=HASH", with the path and the SHA-256 of the running executable,
// where the analysis framework writes "comments-go-here".
func Full(w io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	f, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s version devel gpustate-%s buildID=%02x\n", exe, String(), h.Sum(nil))
	return err
}
