package apicheck

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckRefusesWhatTheDocumentDoesNot: Check fails an answer whose
// status the operation does not document and one whose body is not its
// schema, so that a test passing through it means something.
func TestCheckRefusesWhatTheDocumentDoesNot(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../api/openapi.json")
	require.NoError(t, err)
	ch, err := New(raw)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	header := http.Header{"Content-Type": {"application/json"}}
	require.NoError(t, ch.Check(req, http.StatusOK, header, []byte(`{"status":"ok"}`)))
	require.Error(t, ch.Check(req, http.StatusTeapot, header, []byte(`{"status":"ok"}`)), "an undocumented status")
	require.Error(t, ch.Check(req, http.StatusOK, header, []byte(`{"status":5}`)), "a body that is not the schema")
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	stats := httptest.NewRequest(http.MethodGet, "/v1/stats", nil)
	require.Error(t, ch.Check(stats, http.StatusUnauthorized, problem, []byte(`{"status":"401"}`)), "a problem that is not the Problem schema")
	require.NoError(t, ch.Check(httptest.NewRequest(http.MethodGet, "/v1/nothing-here", nil), http.StatusNotFound, problem, []byte(`{}`)), "no operation, nothing to check")
}
