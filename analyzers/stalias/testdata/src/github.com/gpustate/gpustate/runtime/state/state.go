// Package state stands in for the runtime's package users name.
package state

// Owner names the owner of a head.
type Owner string

// Domain names a sharing domain.
type Domain string

// Pool hands out heads.
type Pool struct{ n int }
