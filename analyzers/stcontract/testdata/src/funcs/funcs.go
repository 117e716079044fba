package funcs

// Buffer is a resource.
type Buffer struct{ data []float32 }

//state:release // want `//state:release applies to a method \(it releases its receiver\), and func Free is a plain func; use //state:frees NAME`
func Free(b *Buffer) {}

//state:mutates // want `//state:mutates applies to a method \(it changes its receiver\), and func Mut is a plain func`
func Mut(b *Buffer) {}

//state:appends // want `//state:appends applies to a method`
func App(b *Buffer) error { return nil }

//state:view // want `//state:view applies to a method`
func View(b *Buffer) []float32 { return nil }

//state:takes buff // want `//state:takes buff on func Put names no parameter; did you mean buf\?`
func Put(buf *Buffer) {}

//state:takes zzz // want `//state:takes zzz on func Put2 names no parameter; the parameters are a, b`
func Put2(a, b *Buffer) {}

//state:takes x // want `//state:takes x on func NoParams names no parameter: NoParams has no named parameters`
func NoParams() {}

//state:takes // want `//state:takes on func Bare needs a parameter name`
func Bare(b *Buffer) {}

//state:writes n // want `//state:writes n on func Fill: parameter n has type int, which is neither a slice nor a pointer`
func Fill(n int, p *int, s []float32) {}

//state:writes p s
func Fill2(n int, p *int, s []float32) {}

//state:writes b // want `parameter b has type Buffer, which is neither a slice nor a pointer`
func FillStruct(b Buffer) {}

//state:writes v // want `parameter v has type V, which is neither a slice nor a pointer`
func FillAny[V any](v V) {}

//state:writes v
func FillPtr[V ~*int | ~[]int](v V) {}

//state:acquire // want `//state:acquire on func New: it returns nothing`
func New() {}

//state:acquire
//state:acquire // want `repeated //state:acquire on func New2; keep one`
func New2() *Buffer { return nil }

//state:aquire // want `unknown directive //state:aquire on func New3; did you mean acquire\?`
func New3() *Buffer { return nil }

//state:release now // want `//state:release on method \(\*Buffer\).Close takes no arguments`
func (b *Buffer) Close() error { return nil }

//state:view // want `//state:view on method \(\*Buffer\).Drop: it returns nothing`
func (b *Buffer) Drop() {}

//state:takes b=1 // want `//state:takes on func KV takes parameter names, not key=value`
func KV(b *Buffer) {}

//state:acquire durable // want `method Buffer.Keep claims durability \(durable\)`
func (b Buffer) Keep() *Buffer { return nil }

// state:acquire // want `// state:acquire has a space after //`
func Spaced() *Buffer { return nil }
