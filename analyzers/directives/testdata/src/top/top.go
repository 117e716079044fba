// Package top imports app, which imports ext: the lines hold here too.
package top

import (
	"app"
	"gpu"
)

func Top(b gpu.Backend) {
	p := app.Use(b)
	p.Close()          // want `call \(\*gpu.Pool\).Close: directives release`
	q, _ := gpu.Open() // want `call gpu.Open: directives acquire`
	_ = q
}
