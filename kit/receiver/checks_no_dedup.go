//go:build receiver_mutant_no_dedup

package receiver

// A mutant that records no dedup row: it breaks the contract (see checks.go).
const dedupChecked, cursorChecked = false, true
