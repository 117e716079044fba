// Package mlcontracts is the one contracts file of an application for the
// binding ml, which it does not import: every package that imports this
// one sees ml's calls with these facts.
package mlcontracts

//state:extern acquire ml.Open
//state:extern release ml.Backend.Close
//state:extern acquire ml.Backend.NewContext
//state:extern acquire ml.Backend.NewContextSize
//state:extern release ml.Context.Close
//state:extern view ml.Context.Layer
//state:extern view ml.Context.Input

// Loaded is imported for its contracts.
const Loaded = true
