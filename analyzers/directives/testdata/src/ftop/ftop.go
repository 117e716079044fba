package ftop // want package:"directives imported" package:"extern gpu.Backend.NewContext:acquire gpu.Context.Close:release gpu.Context.Layer:view gpu.Open:acquire gpu.Pool.Close:release gpu.Pool.Put:takes=b"

import "fapp"

// ftop imports fapp, which imports ext: the lines hold here too.
var _ = fapp.X
