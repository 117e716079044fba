// Package ifacealias writes through views of snapshots with kernels known
// to write from an interface method's directive and from extern lines.
package ifacealias

import (
	"kernels"
	"snapres"
)

//state:extern writes dst kernels.Scale
//state:extern writes dst kernels.Launcher.Fill

// Writer is a kernel launcher of this package.
type Writer interface {
	//state:writes dst
	Write(dst []float32)
	Read(src []float32)
}

func writes(v *snapres.Snap, w Writer, l kernels.Launcher) {
	rows := v.Rows()
	w.Write(rows)          // want `write through a view of snapshot Snap`
	kernels.Scale(rows, 2) // want `write through a view of snapshot Snap`
	l.Fill(rows)           // want `write through a view of snapshot Snap`
	w.Read(rows)
}
