package contract_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestReleaseSkippedKeepsTheLanesOwnSkipsFirst: a release names the skips
// and voided sequences between the lane's previous sequence and its event,
// sorted, at most contract.MaxSkippedListed of them: voided ones give way
// first (a receiver never stands on one), then the oldest skips.
func TestReleaseSkippedKeepsTheLanesOwnSkipsFirst(t *testing.T) {
	t.Parallel()
	require.Nil(t, contract.ReleaseSkipped(nil, []int64{1, 9}, 1, 9), "nothing strictly between")
	require.Equal(t, []int64{3, 4, 6}, contract.ReleaseSkipped([]int64{4, 6}, []int64{1, 3, 4, 8}, 2, 7))
	var own, voided []int64
	for s := int64(10); s < 10+contract.MaxSkippedListed-2; s++ {
		own = append(own, s)
	}
	for v := int64(100); v < 110; v++ {
		voided = append(voided, v)
	}
	got := contract.ReleaseSkipped(own, voided, 0, 1000)
	require.Len(t, got, contract.MaxSkippedListed)
	require.Equal(t, own, got[:len(own)], "every skip of the lane stays")
	require.Equal(t, []int64{108, 109}, got[len(own):], "the newest voided fill the rest")
	many := append(append([]int64{}, own...), 50, 51, 52, 53)
	got = contract.ReleaseSkipped(many, voided, 0, 1000)
	require.Equal(t, many[len(many)-contract.MaxSkippedListed:], got, "skips beyond the cap: the newest, no voided")
}
