package vkext // want package:"directives declared" package:"extern vk.AllocIn:child=pool vk.CmdPool.Alloc:child=recv vk.CreateImage:acquire result=0 result=1 vk.DestroyImage:frees=img vk.NewWindow:acquire releaser=1 vk.Submit:takes=b\\(onsuccess\\) vk.Texture.Valid:valid vk.mapErr:errmap"

// Package vkext holds the contracts of package vk, which it does not
// import: the verbs bindings need beyond acquire and release.

//state:extern acquire 0 1 vk.CreateImage
//state:extern frees img vk.DestroyImage
//state:extern acquire release=1 vk.NewWindow
//state:extern takes b onsuccess vk.Submit
//state:extern child recv vk.(*CmdPool).Alloc
//state:extern child pool vk.AllocIn
//state:extern valid vk.Texture.Valid
//state:extern errmap vk.mapErr

// Destroy frees its argument.
//
//state:frees img
func Destroy(img *int) {} // want Destroy:"directives frees=img"

// Create acquires both results.
//
//state:acquire 0 1 release=2
func Create() (*int, *int, func(), error) { return nil, nil, nil, nil } // want Create:"directives acquire result=0 result=1 releaser=2"
