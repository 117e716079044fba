package ext // want package:"directives declared" package:"extern gpu.Backend.NewContext:acquire gpu.Context.Close:release gpu.Context.Layer:view gpu.Open:acquire gpu.Pool.Close:release gpu.Pool.Put:takes=b"

// Package ext holds the contracts of package gpu, which it does not import.

//state:extern acquire gpu.Backend.NewContext
//state:extern release gpu.Context.Close
//state:extern view gpu.Context.Layer

//state:extern acquire gpu.Open
//state:extern release gpu.(*Pool).Close
//state:extern takes b gpu.(*Pool).Put

// Helper is here so that the package has code.
func Helper() {}
