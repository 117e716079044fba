// Package kernels stands for a third-party kernel launcher with no
// directives: package ifacealias gives it extern lines.
package kernels

func Scale(dst []float32, k float32) {}

type Launcher interface {
	Fill(dst []float32)
}
