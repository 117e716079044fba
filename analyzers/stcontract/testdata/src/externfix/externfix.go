package externfix

import "example.com/gpu"

var _ = gpu.Sync

//state:extern aquire example.com/gpu.Open // want `unknown directive "aquire" in //state:extern; did you mean acquire\?`
//state:extern acquire example.com/gpu.Opne // want `//state:extern names no func Opne in example.com/gpu; did you mean Open\?`
//state:extern release example.com/gpu.Context.Clsoe // want `did you mean Close\?`
//state:extern release example.com/gpu.(*Context).Close // want `Context is an interface`
//state:extern takes nn example.com/gpu.(*Pool).Put // want `did you mean n\?`
