package bad

import "dims"

var n = 3

var _ = dims.Var

// Token is an index into a vocabulary.
type Token uint32

//state:contract // want `state type Missing has no //state:growth line` `state type Missing has no //state:owner line`
type Missing struct{ X []int32 }

//state:contract
//state:growth append bound=64
//state:owner session
//state:brnch isolated merge=unsupported // want `unknown directive //state:brnch on state type Typos; did you mean branch\?`
//state:rollback descendents=keep // want `unknown key descendents in //state:rollback of Typos; did you mean descendants\?`
//state:retention optinal // want `bad value "optinal" for //state:retention of Typos; did you mean optional\?`
//state:snapshot frozen // want `bad value "frozen" for //state:snapshot of Typos; use immutable or none`
//state:frobnicate // want `unknown directive //state:frobnicate on state type Typos; use one of contract, growth`
type Typos struct{ X []int32 }

//state:contract
//state:growth append bound=64
//state:owner session
//state:retention reconstructable // want `reconstructable state Recon needs a //state:checkpoint line`
type Recon struct{ X []int32 }

//state:contract
//state:growth append bound=64
//state:owner session
//state:snapshot none
//state:rollback descendants=keep // want `//state:rollback of NoSnap needs snapshots`
//state:checkpoint every=8 keep=2 // want `//state:checkpoint of NoSnap needs snapshots`
type NoSnap struct{ X []int32 }

//state:contract
//state:growth append bound=64
//state:owner session
//state:retention durable // want `the contract of Durable claims durability \(durable\)`
//state:checkpoint every=8 keep=2 crash-safe=true // want `claims durability \(crash-safe\)`
type Durable struct{ X []int32 }

//state:contract
//state:growth append bound=64
//state:owner session
//state:branch isolated // want `isolated branches of NoMerge need a merge decision; add merge=unsupported or merge=fastforward`
type NoMerge struct{ X []int32 }

//state:contract
//state:growth append bound=64
//state:owner session
type Fields struct {
	Keys  []float32
	Name  string       // want `field Name of state type Fields has type string; state fields are slices`
	Words []string     // want `field Words of state type Fields has element type string, which is not fixed-size`
	Flags []bool       // want `field Flags of state type Fields has element type bool`
	Ptrs  []*int       // want `field Ptrs of state type Fields has element type \*int`
	Cplx  []complex128 // want `field Cplx of state type Fields has element type complex128`
	Empty [][0]int8    // want `field Empty of state type Fields has element type \[0\]int8`
	Toks  []Token
	Wide  []int8 `state:"width=x"`  // want `field Wide of state type Fields: bad width "x"`
	Tag   []int8 `state:"witdh=2"`  // want `unknown key witdh in tag state:"witdh=2"; did you mean width\?`
	Any   []any                     // want `field Any of state type Fields has element type any`
	Map   map[int]int               // want `field Map of state type Fields has type map\[int\]int`
	Arr   [4]int8                   // want `field Arr of state type Fields has type \[4\]int8`
	Chan  []chan int                // want `field Chan of state type Fields has element type chan int`
	Struc []struct{ A, B float32 }  // want `field Struc of state type Fields has element type struct`
	Nest  [][2][3]uint8             // a nested array is fixed-size
	Named []Token `state:"width=4"` // a named integer type is fixed-size
}

//state:contract
//state:growth append bound=n // want `bound "n" of BoundVar is not a constant`
//state:owner session
type BoundVar struct{ X []int32 }

//state:contract
//state:growth append bound=2.5 // want `bound "2.5" of BoundFloat is not an integer constant`
//state:owner session
type BoundFloat struct{ X []int32 }

//state:contract
//state:growth append bound=Undefined // want `bound "Undefined" of BoundUndef is not a valid constant expression \(undefined: Undefined\)`
//state:owner session
type BoundUndef struct{ X []int32 }

//state:contract
//state:growth append bound=1-2 // want `bound "1-2" of BoundNeg is -1; a bound must be a positive number of rows`
//state:owner session
type BoundNeg struct{ X []int32 }

//state:contract
//state:growth mutable // want `mutable growth of MutNoBound needs bound=N`
//state:owner session
type MutNoBound struct{ X []int32 }

//state:contract
//state:growth mutable bound=unbounded // want `mutable growth of MutUnbounded cannot be unbounded`
//state:owner session
type MutUnbounded struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
//state:owner request // want `repeated //state:owner in the contract of Repeat \(first at line 107\); keep one`
//state:branch none merge=fastforward // want `merge applies only to isolated branches, and Repeat has branch none`
type Repeat struct{ X []int32 }

//state:contract
// state:growth append bound=8 // want `// state:growth has a space after //, so gofmt treats it as prose`
//state:owner session
type Spaced struct{ X []int32 }

//state:contract
//state:Growth append bound=8 // want `//state:Growth is not a directive \(verbs are lowercase words\); write //state:growth`
//state:owner session
type Upper struct{ X []int32 }

//state:contract purpose="unterminated // want `malformed argument in //state:contract of Quote: unterminated or malformed quoted value for purpose`
//state:growth append bound=8
//state:owner session
type Quote struct{ X []int32 }

//state:contract
//state:growth append bound=8 extra // want `//state:growth of Extra takes one word; remove "extra"`
//state:owner session kind // want `//state:owner of Extra takes one owner kind; remove "kind"`
//state:cleanup // want `//state:cleanup of Extra needs on=EVENT`
//state:rollback // want `//state:rollback of Extra needs descendants=invalidate or descendants=keep`
//state:checkpoint keep=2 // want `//state:checkpoint of Extra needs every=N or budget=BYTES: a checkpoint every N versions, or whenever the deltas written since the last one reach BYTES`
type Extra struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
//state:checkpoint every=4 keep=2 budget=1<<20 // want `//state:checkpoint of Both has both every and budget; choose one: every=N for a fixed spacing of N versions, budget=BYTES for a spacing in bytes replayed \(a checkpoint whenever the deltas written since the last one reach BYTES\)`
type Both struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
//state:checkpoint budget=1<<20 keep=2 every=4 // want `//state:checkpoint of BothReversed has both every and budget; choose one`
type BothReversed struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
//state:checkpoint budget=0 keep=2 // want `budget="0" in //state:checkpoint of ZeroBudget is 0; write a positive integer constant`
type ZeroBudget struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
//state:checkpoint budget=-1 keep=2 // want `budget="-1" in //state:checkpoint of NegativeBudget is -1; write a positive integer constant`
type NegativeBudget struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
//state:checkpoint keep=2 budget=1.5 // want `budget="1.5" in //state:checkpoint of FractionBudget is not an integer constant; write a positive integer constant`
type FractionBudget struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
type Widths struct {
	Var   []int8  `state:"width=n"`                     // want `field Var of state type Widths: bad width "n" in tag, which is not a constant; write state:"width=W" with W a positive integer constant`
	IVar  []int8  `state:"width=dims.Var"`              // want `field IVar of state type Widths: bad width "dims.Var" in tag, which is not a constant`
	Float []int8  `state:"width=dims.Half"`             // want `field Float of state type Widths: bad width "dims.Half" in tag, which is not an integer constant`
	Zero  []int8  `state:"width=dims.Head - dims.Head"` // want `field Zero of state type Widths: bad width "dims.Head - dims.Head" in tag, which is 0`
	Neg   []int8  `state:"width=-dims.Head"`            // want `field Neg of state type Widths: bad width "-dims.Head" in tag, which is -64`
	Undef []int8  `state:"width=dims.Tail"`             // want `field Undef of state type Widths: bad width "dims.Tail" in tag, which is not a valid constant expression \(undefined: dims.Tail\)`
	Over  []int8  `state:"width=1<<64"`                 // want `field Over of state type Widths: bad width "1<<64" in tag, which overflows int64`
	Wide  []int64 `state:"width=1<<40"`                 // want `field Wide of state type Widths has rows of more than 1099511627776 bytes \(width 1099511627776 of 8-byte elements\); use a smaller width`
	Empty []int8  `state:"width="`                      // want `field Empty of state type Widths: bad width ""`
}

//state:contract
//state:growth append bound=dims.Var // want `bound "dims.Var" of BoundImportedVar is not a constant`
//state:owner session
type BoundImportedVar struct{ X []int32 }

//state:contract
//state:growth append bound=other.Rows // want `bound "other.Rows" of BoundNotImported is not a valid constant expression \(undefined: other\)`
//state:owner session
type BoundNotImported struct{ X []int32 }

// The sizes below are past what any device or host can hold.

//state:contract
//state:growth mutable bound=dims.Limit // want `state type Overflow needs 9223372036854775807 rows of 8 bytes, a size that overflows int64; no device can hold it: lower the bound or the field widths`
//state:owner session
type Overflow struct{ X []int64 }

//state:contract
//state:growth append bound=1<<46 // want `state type TooTall may grow to 512 TiB \(70368744177664 rows of 8 bytes\), more than the 256 TiB \(1<<48 bytes\) a 48-bit address space maps, so no device or host can hold it: lower the bound or the field widths`
//state:owner session
type TooTall struct{ X []float64 }

//state:contract
//state:growth mutable bound=dims.Rows // want `state type TooWide needs 16 PiB \(4096 rows of 4398046511104 bytes\), more than the 256 TiB`
//state:owner session
type TooWide struct {
	K []float32 `state:"width=1<<38"`
	V []float32 `state:"width=1<<38"`
	P []float32 `state:"width=1<<38"`
	Q []float32 `state:"width=1<<38"`
}
