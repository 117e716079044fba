package flow

// SetDirectives makes every package see d as its directives until the
// returned function is called.
func SetDirectives(d Directives) (restore func()) {
	override = d
	return func() { override = nil }
}
