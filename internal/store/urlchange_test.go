package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
)

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://a.example/x", "https://a.example/y?q=1", true},
		{"https://A.example./x", "https://a.example:443/", true},
		{"http://127.0.0.1:80/x", "http://127.0.0.1/y", true},
		{"https://a.example/x", "http://a.example/x", false},
		{"https://a.example/x", "https://b.example/x", false},
		{"http://127.0.0.1:9000/x", "http://127.0.0.1:9997/steal", false},
		{"https://a.example/x", "https://a.example:8443/x", false},
		{"http://127.0.0.1:80:80/x", "http://127.0.0.1:80:80/x", false},
	} {
		require.Equal(t, tc.same, store.SameOrigin(tc.a, tc.b), "%s %s", tc.a, tc.b)
	}
}

// TestEndpointUpdateKeepsHeadersWithTheirOrigin: a change of URL to another
// origin is refused while the endpoint has custom headers and the change
// does not send them again, and nothing of it is made or recorded. Judged
// on the locked row: of two concurrent changes, the one that left headers
// out never carries the other's headers to its own origin.
func TestEndpointUpdateKeepsHeadersWithTheirOrigin(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := context.Background()
	h := map[string]string{"X-Api-Key": "rcv_live_1"}
	_, err := st.EndpointCreate(ctx, store.Endpoint{ID: "hdr", URL: "https://a.example/hook", Secret: "whsec_x",
		Settings: store.Settings{Headers: h, URLPathPublic: true}}, store.Caps{})
	require.NoError(t, err)
	by := store.Actor{ID: "key_w", Name: "writer"}

	away := "https://b.example/steal"
	_, err = st.EndpointUpdate(ctx, "hdr", store.EndpointChange{URL: &away, By: by})
	require.ErrorIs(t, err, store.ErrHeadersOrigin)
	ep, err := st.EndpointGet(ctx, "hdr")
	require.NoError(t, err)
	require.Equal(t, "https://a.example/hook", ep.URL)
	changes, err := st.EndpointURLChanges(ctx, "hdr", 10)
	require.NoError(t, err)
	require.Empty(t, changes)

	// The same origin keeps them, and the path's being public goes with
	// the old URL.
	near := "https://a.example/v2"
	ep, err = st.EndpointUpdate(ctx, "hdr", store.EndpointChange{URL: &near, By: by})
	require.NoError(t, err)
	require.Equal(t, h, ep.Settings.Headers)
	require.False(t, ep.Settings.URLPathPublic)

	// Concurrent: one sets headers for a.example again, the other moves
	// away without them. Whatever the order, no row ends on b.example with
	// the headers.
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(2)
		back, keep := "https://a.example/hook", map[string]string{"X-Api-Key": "rcv_live_2"}
		go func() {
			defer wg.Done()
			_, _ = st.EndpointUpdate(ctx, "hdr", store.EndpointChange{URL: &back, Headers: &keep, By: by})
		}()
		go func() {
			defer wg.Done()
			_, _ = st.EndpointUpdate(ctx, "hdr", store.EndpointChange{URL: &away, By: by})
		}()
		wg.Wait()
		ep, err = st.EndpointGet(ctx, "hdr")
		require.NoError(t, err)
		require.False(t, ep.URL == away && len(ep.Settings.Headers) > 0, "headers on the new origin")
	}
	changes, err = st.EndpointURLChanges(ctx, "hdr", 100)
	require.NoError(t, err)
	require.Equal(t, "https://a.example/hook", changes[len(changes)-1].OldURL, "public then")
	require.Equal(t, "https://a.example/[redacted]", changes[len(changes)-1].NewURL)
}
