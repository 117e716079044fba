// Command mainprog leaks in main, which ends the process.
package main

import "res"

func main() {
	s := res.Open()
	s.Append(1)
	run()
}

func run() {
	s := res.Open() // want `not released on every path`
	s.Append(1)
}
