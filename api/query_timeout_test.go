package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"
	must "github.com/stretchr/testify/require"
)

// TestEveryOperationDocumentsTheQueryTimeout: every /v1 operation runs on
// the request pool, whose statements stop at HOOKFLOW_STATEMENT_TIMEOUT,
// writes as much as reads, so the document tells a client of each that it
// may be answered 503 query-timeout, and when to retry.
func TestEveryOperationDocumentsTheQueryTimeout(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Description string         `json:"description"`
				Headers     map[string]any `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
	}
	must.NoError(t, json.Unmarshal(openAPIDoc, &doc))
	for path, ops := range doc.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method, op := range ops {
			if method == "parameters" {
				continue
			}
			r, ok := op.Responses["503"]
			must.True(t, ok, "%s %s documents no 503", method, path)
			must.Contains(t, r.Description, "`query-timeout`", "%s %s", method, path)
			must.Contains(t, r.Headers, "Retry-After", "%s %s", method, path)
		}
	}
}

// TestBatchStoppedByTheTimeoutCountsItsReplays: a batch replay whose
// statement ran past the timeout after some replays answers how many stood,
// as query-timeout with Retry-After; before any, it is any request's
// timeout, and other errors pass through.
func TestBatchStoppedByTheTimeoutCountsItsReplays(t *testing.T) {
	t.Parallel()
	timedOut := &pgconn.PgError{Code: "57014"}
	ctx := func() (echo.Context, *httptest.ResponseRecorder) {
		rec := httptest.NewRecorder()
		return echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/v1/dead-letters/replay", nil), rec), rec
	}
	c, rec := ctx()
	var p *Problem
	must.ErrorAs(t, batchStopped(c, 3, timedOut), &p)
	must.Equal(t, http.StatusServiceUnavailable, p.Status)
	must.Equal(t, problemTypeBase+"query-timeout", p.Type)
	must.Equal(t, 3, p.Extensions["replayed"])
	must.Contains(t, p.Detail, "replayed 3 dead letter(s)")
	must.Equal(t, "1", rec.Header().Get("Retry-After"))

	c, _ = ctx()
	must.Same(t, timedOut, batchStopped(c, 0, timedOut))
	other := errors.New("connection reset")
	must.Same(t, other, batchStopped(c, 3, other))
}
