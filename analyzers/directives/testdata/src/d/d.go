package d // want package:"directives imported"

import "b"

// D imports b, which imports a: the package fact travels.
var D = b.Wrap
