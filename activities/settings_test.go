package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
)

// setHeaders gives the bundle's endpoint custom headers.
func (b *deliverBundle) setHeaders(t *testing.T, h map[string]string) {
	t.Helper()
	_, err := b.st.EndpointUpdate(context.Background(), b.in.EndpointID, store.EndpointChange{Headers: &h})
	require.NoError(t, err)
}

// attempts returns the attempts recorded for the event.
func (b *deliverBundle) attempts(t *testing.T) []store.Attempt {
	t.Helper()
	got, err := b.st.AttemptsList(context.Background(), b.in.EventID, b.in.EndpointID)
	require.NoError(t, err)
	return got
}

// TestDeliverSendsCustomHeaders: every attempt carries the endpoint's
// custom headers, beside hookflow's own, which still verify.
func TestDeliverSendsCustomHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	url := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	b := setupDeliver(t, url)
	b.setHeaders(t, map[string]string{"Authorization": "Bearer rcv-token-1", "x-tenant": "acme"})

	_, err := b.deliver(t)
	require.NoError(t, err)
	h := <-got
	require.Equal(t, "Bearer rcv-token-1", h.Get("Authorization"))
	require.Equal(t, "acme", h.Get("X-Tenant"))
	require.Equal(t, "application/json", h.Get("Content-Type"))
	require.Equal(t, b.in.EventID, h.Get(webhook.HeaderID))
	require.NotEmpty(t, h.Get(webhook.HeaderSignature))
}

// TestDeliverScrubsEchoedHeaderValues: a receiver whose error page echoes
// the request's headers does not get a custom header's value into the
// stored attempt or the failure Temporal gets (the dead letter's reason and
// the workflow's history).
func TestDeliverScrubsEchoedHeaderValues(t *testing.T) {
	t.Parallel()
	secret := "hdr-s3cret-echoed"
	url := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "bad key %q", r.Header.Get("X-Api-Key"))
	})
	b := setupDeliver(t, url)
	b.setHeaders(t, map[string]string{"X-Api-Key": secret})

	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypePermanent, false, 0)
	requireRedacted(t, b, err, secret, `receiver answered 401: bad key "[redacted]"`)
}

// TestDeliverScrubsAHeaderValueTheCutWouldSplit: an echoed value that
// straddles the recorded answer's 2 KiB cut goes whole, not its first half.
func TestDeliverScrubsAHeaderValueTheCutWouldSplit(t *testing.T) {
	t.Parallel()
	secret := "hdr-s3cret-straddling-the-cut"
	url := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, strings.Repeat("x", 2048-10)+r.Header.Get("X-Api-Key"))
	})
	b := setupDeliver(t, url)
	b.setHeaders(t, map[string]string{"X-Api-Key": secret})

	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypePermanent, false, 0)
	requireRedacted(t, b, err, secret[:10], "receiver answered 401: "+strings.Repeat("x", 2048-10)+"[redacted]")
}

// TestDeliverWaitsItsTurnUnderTheRateLimit: at one delivery a second, an
// attempt right after another sends nothing and records nothing: it answers
// how long until the slot it reserved (Throttled), which the workflow waits
// out; the attempt made again in that slot (SlotReserved) is sent without
// waiting again.
func TestDeliverWaitsItsTurnUnderTheRateLimit(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	url := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	b := setupDeliver(t, url)
	one := 1.0
	_, err := b.st.EndpointUpdate(context.Background(), b.in.EndpointID, store.EndpointChange{RateLimit: &one})
	require.NoError(t, err)

	_, err = b.deliver(t)
	requireFailure(t, err, contract.ErrTypeRetryable, true, 0)
	res, err := b.deliver(t)
	require.NoError(t, err)
	require.Greater(t, res.Throttled, 500*time.Millisecond, "the next slot is about a second away")
	require.LessOrEqual(t, res.Throttled, time.Second)
	require.EqualValues(t, 1, hits.Load(), "a throttled attempt sends nothing")
	require.Len(t, b.attempts(t), 1, "and records nothing")

	b.in.SlotReserved = true
	res, err = b.deliver(t)
	require.NoError(t, err)
	require.Zero(t, res.Throttled, "sent in the slot reserved, though it is still ahead")
	require.EqualValues(t, 2, hits.Load())
	require.Equal(t, contract.StateDelivered, b.event(t).State)
}
