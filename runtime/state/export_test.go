package state

// CheckStreamMarks is checkStreamMarks for the interaction model (package
// state_test).
var CheckStreamMarks = checkStreamMarks
