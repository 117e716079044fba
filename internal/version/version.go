// Package version is the one version of gpustate that its binaries report:
// stategen -version, statevet -V=full (which go vet reads) and the driver
// of statevet's SARIF logs.
package version

import "runtime/debug"

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
