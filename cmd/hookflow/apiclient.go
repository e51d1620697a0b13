package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/kit/client"
)

var apiClientSettings = []string{"HOOKFLOW_API_URL", "HOOKFLOW_API_TOKEN"}

// tenantClientSettings are the settings of the API commands that act on a
// tenant (status, dlq, keys): HOOKFLOW_TENANT (--tenant) names it. demo
// takes none: it walks through hookflow dev's own endpoint, the default
// tenant's.
var tenantClientSettings = concat(apiClientSettings, []string{"HOOKFLOW_TENANT"})

// apiClientDefaults makes the CLI's API commands talk to hookflow dev as it
// is; set HOOKFLOW_API_TOKEN to an API key (or the bootstrap token) for any
// other API.
func apiClientDefaults() map[string]string { return map[string]string{"HOOKFLOW_API_TOKEN": devToken} }

// cliTimeout bounds one API call of the CLI: a batch replay of many dead
// letters takes a while.
const cliTimeout = 2 * time.Minute

// apiClient is the kit's client as the CLI uses it: fail turns its errors
// into the CLI's lines.
type apiClient struct {
	*client.Client
	// tenant is HOOKFLOW_TENANT: each call names it in its typed
	// parameters, as the document has it (?tenant_id= on the operations
	// that take TenantIdQuery, tenant_id in the body of apiKeyCreate), so
	// the compiler holds every call to it rather than a request editor
	// that cannot tell a query from a body.
	tenant string
}

// newAPIClient is the client of the API at HOOKFLOW_API_URL with
// HOOKFLOW_API_TOKEN; a URL it cannot use is a usage error.
func newAPIClient(cfg config.Config) (apiClient, error) {
	if cfg.APIToken == "" {
		return apiClient{}, &config.UsageError{Msg: "HOOKFLOW_API_TOKEN is required: an API key or the bootstrap token"}
	}
	c, err := client.New(cfg.APIURL, cfg.APIToken, client.WithHTTPClient(&http.Client{Timeout: cliTimeout}), client.WithUserAgent("hookflow-cli"))
	if err != nil {
		return apiClient{}, &config.UsageError{Msg: "invalid HOOKFLOW_API_URL: " + err.Error()}
	}
	return apiClient{Client: c, tenant: cfg.Tenant}, nil
}

// tenantID is the tenant as a query parameter: nil, not sent, when none
// is named (the key's own).
func (c apiClient) tenantID() *string { return orNil(c.tenant) }

// fail says what went wrong with a call in one line: the API's problem
// ("409 Not dead-lettered: …"), or that the API could not be reached.
func (c apiClient) fail(err error) error {
	var ue *url.Error
	var pe *client.Error
	switch {
	case errors.As(err, &ue):
		return fmt.Errorf("cannot reach the API at %s (HOOKFLOW_API_URL): %w", c.BaseURL(), ue)
	case errors.As(err, &pe) && pe.Type == "":
		// Not problem details: something other than hookflow answered.
		return fmt.Errorf("API answered %d %s", pe.Status, http.StatusText(pe.Status))
	}
	return err
}
