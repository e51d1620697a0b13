package activities_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
)

// TestRotationSignsWithEveryLiveSecretUntilItsGraceEnds: a rotation keeps
// the replaced secret signing through its grace period; a second rotation
// within it keeps both replaced secrets signing (a receiver that knows only
// the first one is not cut off); once a grace period ends its secret signs
// no more.
func TestRotationSignsWithEveryLiveSecretUntilItsGraceEnds(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sigs []string
	var bodies [][]byte
	var ids, stamps []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		sigs = append(sigs, r.Header.Get(webhook.HeaderSignature))
		bodies = append(bodies, body)
		ids = append(ids, r.Header.Get(webhook.HeaderID))
		stamps = append(stamps, r.Header.Get(webhook.HeaderTimestamp))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable) // keep the event undelivered
	}))
	t.Cleanup(srv.Close)
	b := setupDeliver(t, srv.URL+"/hooks")
	ctx := context.Background()
	first := b.secret
	second, err := webhook.NewSecret()
	require.NoError(t, err)
	third, err := webhook.NewSecret()
	require.NoError(t, err)

	// verifies reports which secrets the n-th request's signature verifies with.
	verifies := func(n int, secrets ...string) []bool {
		mu.Lock()
		defer mu.Unlock()
		h := http.Header{}
		h.Set(webhook.HeaderID, ids[n])
		h.Set(webhook.HeaderTimestamp, stamps[n])
		h.Set(webhook.HeaderSignature, sigs[n])
		out := make([]bool, len(secrets))
		for i, s := range secrets {
			out[i] = webhook.VerifyHeader([]string{s}, h, bodies[n], time.Now(), 0) == nil
		}
		return out
	}
	attempt := func() int {
		_, _ = b.env.ExecuteActivity(b.acts.Deliver, b.in)
		mu.Lock()
		defer mu.Unlock()
		return len(sigs) - 1
	}

	_, err = b.st.EndpointRotateSecret(ctx, "ep_1", second, 2*time.Second)
	require.NoError(t, err)
	ep, err := b.st.EndpointRotateSecret(ctx, "ep_1", third, time.Hour)
	require.NoError(t, err)
	require.Len(t, ep.Previous, 2, "the second rotation keeps the first's secret")

	n := attempt()
	require.Len(t, strings.Fields(sigs[n]), 3)
	require.Equal(t, []bool{true, true, true}, verifies(n, third, second, first), "every live secret signs")

	// The first rotation's grace (2 s) ends: first stops signing; second,
	// replaced by the second rotation, keeps its hour.
	time.Sleep(2100 * time.Millisecond)
	n = attempt()
	require.Len(t, strings.Fields(sigs[n]), 2)
	require.Equal(t, []bool{true, true, false}, verifies(n, third, second, first), "first's grace is over")

	// A rotation drops a secret whose grace is over from the list.
	fourth, err := webhook.NewSecret()
	require.NoError(t, err)
	ep, err = b.st.EndpointRotateSecret(ctx, "ep_1", fourth, time.Hour)
	require.NoError(t, err)
	var kept []string
	for _, p := range ep.Previous {
		kept = append(kept, p.Secret)
	}
	require.Equal(t, []string{second, third}, kept)
}

func TestSigningSecrets(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := store.Endpoint{Secret: "cur", Previous: []store.PreviousSecret{
		{Secret: "old", ExpiresAt: now.Add(-time.Second)},
		{Secret: "mid", ExpiresAt: now.Add(time.Minute)},
		{Secret: "new", ExpiresAt: now.Add(time.Hour)},
	}}
	require.Equal(t, []string{"cur", "mid", "new"}, e.SigningSecrets(now))
	require.Equal(t, now.Add(time.Hour), *e.PreviousExpiresAt(now))
	require.Equal(t, []string{"cur"}, e.SigningSecrets(now.Add(2*time.Hour)))
	require.Nil(t, e.PreviousExpiresAt(now.Add(2*time.Hour)))
}
