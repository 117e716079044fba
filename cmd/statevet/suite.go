package main

import suitepkg "github.com/gpustate/gpustate/analyzers/suite"

// suite is every analyzer statevet runs; the list lives in package suite.
var suite = suitepkg.Analyzers()
