//go:build receiver_mutant_no_cursor && !receiver_mutant_no_dedup

package receiver

// A mutant that applies whatever the cursor says: it breaks the contract
// (see checks.go).
const dedupChecked, cursorChecked = true, false
