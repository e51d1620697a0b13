package e2e

import (
	"context"
	"encoding/hex"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/lab/spantest"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/lab/testenv/redistest"
)

// TestBrokerCredentialsRedacted: a broker destination's password, used for
// a delivery and then refused by the broker (its operator changed it), is
// in the endpoint's own row and nowhere else: not in an attempt, a dead
// letter, an answer of the API, a log, a span or a workflow's history.
func TestBrokerCredentialsRedacted(t *testing.T) {
	t.Parallel()
	tp, spans := spantest.Install(t)
	ic, err := tracing.TemporalInterceptor(tp)
	require.NoError(t, err)
	logs := &logBuffer{}
	logger := slog.New(slog.NewMultiHandler(
		slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}),
		testenv.Logger(t).Handler(),
	))
	b := setup(t, options{window: 6 * time.Second, logger: logger, interceptors: []interceptor.ClientInterceptor{ic}})
	s := redistest.ForTest(t)
	ctx := context.Background()
	prefix := "hf" + b.prefix
	require.NoError(t, s.CreateStream(ctx, prefix, "consumers"))
	password := s.Password()
	ep := b.createEndpointWith(map[string]any{"type": "redis", "config": map[string]any{"addr": s.Addr(), "stream": prefix, "tls": false},
		"credentials": s.Credentials()})
	corr := b.id("cred")
	code, _ := b.postEvent(corr+"-1", corr, 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(corr+"-1", contract.StateDelivered, time.Minute)

	// The broker's operator changes the password and drops hookflow's
	// connections: every attempt now logs in with the old one, refused.
	admin := s.Client()
	defer admin.Close()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", redistest.User, "resetpass", ">"+"new-"+randHex(16)).Err())
	require.NoError(t, admin.Do(ctx, "CLIENT", "KILL", "USER", redistest.User, "SKIPME", "yes").Err())
	code, _ = b.postEvent(corr+"-2", corr, 2, ep.ID, map[string]any{"n": 2})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(corr+"-2", contract.StateDeadLettered, time.Minute)

	var stored string
	require.NoError(t, b.store.Pool().QueryRow(ctx, "SELECT credentials->>'password' FROM endpoints WHERE id = $1", ep.ID).Scan(&stored))
	require.Equal(t, password, stored, "kept in the endpoint's own row, for its deliveries")
	dl := b.deadLetter(corr + "-2")
	require.Contains(t, strings.ToLower(dl.Reason), "wrongpass", "the refusal is told")
	where := map[string]string{
		"database":          b.databaseText(t, ep.ID, ep.URL),
		"API answers":       b.apiText(corr+"-2") + b.endpointsText(b.cfg.APIToken, ep.ID),
		"logs":              logs.String(),
		"spans":             spansText(spans.Ended()),
		"event history":     b.historyText(corr+"-2") + b.historyText(corr+"-1"),
		"sequencer history": b.historyText(contract.SequencerID(contract.DefaultTenant, corr)),
	}
	for _, name := range slices.Sorted(maps.Keys(where)) {
		for what, v := range map[string]string{"the password": password, "the password (hex)": hex.EncodeToString([]byte(password))} {
			if lines := linesWith(where[name], v); len(lines) > 0 {
				t.Errorf("%s is in the %s:\n%s", what, name, strings.Join(lines, "\n"))
			}
		}
	}
	// The dumps hold what they should, so their silence means something.
	require.Contains(t, where["API answers"], `"password":"********"`)
	require.Contains(t, strings.ToLower(where["database"]), "wrongpass")
	require.Contains(t, where["logs"], "event dead-lettered")
	require.Contains(t, where["event history"], corr+"-2")
}
