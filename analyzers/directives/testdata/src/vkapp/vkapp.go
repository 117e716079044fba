package vkapp

import "vkext"

// vkapp imports vkext: its lines hold here, and its functions' facts.
func use() {
	a, b, _, _ := vkext.Create() // want `call vkext.Create: directives acquire result=0 result=1 releaser=2`
	vkext.Destroy(a)             // want `call vkext.Destroy: directives frees=img`
	vkext.Destroy(b)             // want `call vkext.Destroy: directives frees=img`
}
