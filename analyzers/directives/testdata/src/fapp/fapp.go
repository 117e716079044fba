package fapp // want package:"directives imported" package:"extern gpu.Backend.NewContext:acquire gpu.Context.Close:release gpu.Context.Layer:view gpu.Open:acquire gpu.Pool.Close:release gpu.Pool.Put:takes=b"

import "ext"

// fapp imports ext: its lines hold here.
var _ = ext.Helper
var X = 1
