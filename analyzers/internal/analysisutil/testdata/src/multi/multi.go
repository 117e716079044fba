// Package multi holds ignores naming two analyzers: an ignore is used when
// either fires on its line, and silences nothing when neither does.
package multi

func growth()   {}
func released() {}

func onlyReleasedFires() {
	//statevet:ignore stgrowth,streleased reason="only streleased fires here"
	released()
}

func onlyGrowthFires() {
	//statevet:ignore stgrowth,streleased reason="only stgrowth fires here"
	growth()
}

func bothFire() {
	growth()   //statevet:ignore stgrowth,streleased reason="each silences its own"
	released() //statevet:ignore streleased,stgrowth reason="in either order"
}

func neitherFires() {
	//statevet:ignore stgrowth,streleased reason="nothing fires" // want `//statevet:ignore stgrowth,streleased silences nothing: no stgrowth or streleased finding on this line or the next`
	_ = 1
}

func unsilenced() {
	released() // want `call of released`
}
