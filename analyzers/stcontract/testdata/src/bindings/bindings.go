// Package bindings holds the verbs of graphics bindings where they cannot
// apply: each is a finding at its token.
package bindings

type Image struct{}
type Texture uint32

//state:frees im // want `//state:frees im on func Destroy names no parameter; did you mean img\?`
func Destroy(img *Image) {}

//state:takes img onsuccess // want `//state:takes ... onsuccess on func Put: it has no error result`
func Put(img *Image) {}

//state:acquire 0 2 // want `//state:acquire on func Create: result 2 does not exist; it has 2 results`
func Create() (*Image, error) { return nil, nil }

//state:acquire 1 // want `//state:acquire 1 on func CreateErr: result 1 is its error, not a resource`
func CreateErr() (*Image, error) { return nil, nil }

//state:acquire release=0 // want `//state:acquire release=0 on func Win: result 0 has type \*Image, not a func\(\) that releases the resource`
func Win() (*Image, func(), error) { return nil, nil, nil }

//state:child pol // want `//state:child pol on func Alloc names no parameter; did you mean pool\?`
func Alloc(pool *Image) *Image { return nil }

//state:child recv // want `//state:child recv on func AllocF: a plain func has no receiver`
func AllocF(pool *Image) *Image { return nil }

//state:acquire
//state:child pool // want `//state:child and //state:acquire on func AllocA contradict each other`
func AllocA(pool *Image) *Image { return nil }

//state:valid // want `//state:valid applies to a method`
func Valid(t Texture) bool { return t != 0 }

//state:valid // want `//state:valid on method Texture.Live: it must return a single bool`
func (t Texture) Live() int { return 0 }

//state:errmap // want `//state:errmap on func Code: it must take an error and return an error`
func Code(n int) error { return nil }

//state:extern frees im bindings.Destroy // want `//state:extern frees im names no parameter of bindings.Destroy; did you mean img\?`

//state:extern valid bindings.Valid // want `//state:extern valid applies to a method`

//state:extern acquire 3 bindings.Create // want `//state:acquire on bindings.Create: result 3 does not exist`

// ---- what applies ----

//state:frees img
func Delete(img *Image) {}

//state:acquire 0 1 release=2
func CreateTwo() (*Image, *Image, func(), error) { return nil, nil, nil, nil }

//state:valid
func (t Texture) Valid() bool { return t != 0 }

//state:errmap
func Map(err error) error { return err }

//state:takes img onsuccess
func Submit(img *Image) error { return nil }

//state:child recv
func (t Texture) Level() *Image { return nil }
