//go:build !receiver_mutant_no_dedup && !receiver_mutant_no_cursor

package receiver

// dedupChecked and cursorChecked are the contract's two checks: the dedup
// record of each event, and the cursor's order rule. They are false only
// in a mutant build (build tag receiver_mutant_no_dedup or
// receiver_mutant_no_cursor), which the conformance tests build to show
// that the conformance run fails a receiver without one of them; the other
// kits have the same two switches.
const dedupChecked, cursorChecked = true, true
