// Package gpuonly imports gpu but not ext: ext's lines do not hold here,
// and the package is inactive.
package gpuonly

import "gpu"

func Use() {
	p, _ := gpu.Open()
	p.Close()
}
