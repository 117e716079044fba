package fixes

//state:contract
//state:growht append bound=64 // want `unknown directive //state:growht on state type A; did you mean growth\?`
//state:owner session
//state:branch isolated // want `isolated branches of A need a merge decision`
type A struct{ X []int32 }

//state:contract
//state:growth append bond=64 // want `unknown key bond in //state:growth of B; did you mean bound\?`
//state:owner session
//state:retention optinal // want `bad value "optinal" for //state:retention of B; did you mean optional\?`
//state:branch isolated merge=fastforwrd // want `bad value "fastforwrd" for merge in //state:branch of B; did you mean fastforward\?`
type B struct{ X []int32 }

//state:contract
// state:growth append bound=64 // want `// state:growth has a space after //`
//state:Owner session // want `//state:Owner is not a directive`
type C struct{ X []int32 }

//state:takes buff // want `did you mean buf\?`
func Put(buf []byte) {}

//state:contract
//state:growth append bound=64
//state:owner session
//state:share prefx key=toks // want `bad value "prefx" for //state:share of D; did you mean prefix\?` `share key "toks" of D names no field of D; did you mean Toks\?`
type D struct{ Toks []uint16 }
