package api

import (
	"bytes"
	"testing"

	must "github.com/stretchr/testify/require"
)

// TestOperationsNeedAKnownScope: a /v1 operation whose x-hookflow-scope is
// missing or misspelt stops the API at start, naming it; the document as
// it is loads with every operation's scope.
func TestOperationsNeedAKnownScope(t *testing.T) {
	t.Parallel()
	ops, err := loadOperations(openAPIDoc)
	must.NoError(t, err)
	must.Equal(t, ScopeEventsWrite, ops["eventCreate"].scope)
	must.Equal(t, ScopeAdmin, ops["apiKeyList"].scope)
	must.Empty(t, ops["healthz"].scope)

	const scope = `"x-hookflow-scope": "events:write"`
	must.Equal(t, 1, bytes.Count(openAPIDoc, []byte(scope)), "the test edits eventCreate's scope")
	misspelt := bytes.Replace(openAPIDoc, []byte(scope), []byte(`"x-hookflow-scope": "event:write"`), 1)
	_, err = loadOperations(misspelt)
	must.ErrorContains(t, err, `POST /v1/events names the scope "event:write"`)
	missing := bytes.Replace(openAPIDoc, []byte(scope), []byte(`"x-hookflow-unused": true`), 1)
	_, err = loadOperations(missing)
	must.ErrorContains(t, err, "POST /v1/events names no x-hookflow-scope")
}
