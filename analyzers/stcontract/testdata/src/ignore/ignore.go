package ignore

// Durable claims durability, deliberately.
//
//state:contract
//state:growth mutable bound=64
//state:owner session
//statevet:ignore stcontract reason="the claim documents an external store's contract"
//state:retention durable
type Durable struct{ X []int32 }

// Kept has an ignore that silences nothing.
//
//state:contract
//state:growth mutable bound=64
//statevet:ignore stcontract reason="nothing to silence" // want `//statevet:ignore stcontract silences nothing`
//state:owner session
type Kept struct{ X []int32 }

// Typo names an analyzer that does not exist.
//
//statevet:ignore stcleanpu reason="misspelt" // want `names "stcleanpu", which is no statevet analyzer .*: did you mean stcleanup\?`
//state:contract
//state:growth mutable bound=64
//state:owner session
type Typo struct{ X []int32 }

func f() {
	//statevet:ignore // want `//statevet:ignore names no analyzer`
	//statevet:ignore reason="x" // want `names no analyzer`
	//statevet:ignore stcleanup because // want `unexpected "because"`
	//statevet:ignore stcleanup reason=unquoted // want `the reason is not a quoted string`
	//statevet:ignore stcleanup reason="x" and more // want `unexpected "and more" after the reason`
	//statevet:ignore stcleanup,,stalias reason="x" // want `empty analyzer name`
	//statevet:ignore stalias,streleased reason="other analyzers' ignores are theirs to check"
}
