package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	wire "github.com/hookflow/hookflow/kit/client"
)

// EndpointTest sends the endpoint a hookflow.test event (the
// portal's "Send test event"), so its owner sees a delivery arrive without
// publishing into a correlation of their own: it goes to this endpoint
// alone, in the endpoint's test correlation (store.TestCorrelation), at
// the next sequence the ledger gives it, and is delivered as every event
// is (its workflow, the sequencer, signed). It is a publish, so it spends
// the key's and the tenant's posts as POST /v1/events does. A disabled
// endpoint would only park it: refused (409), nothing stored.
func (s *Server) EndpointTest(c echo.Context, id wire.Key, _ wire.EndpointTestParams) error {
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	if ep.Disabled {
		return problem(http.StatusConflict, "endpoint-disabled", "Endpoint disabled",
			"endpoint "+ep.ID+" is disabled: a test event would wait until it is enabled again (PATCH it with disabled false)")
	}
	if err := s.limitTenantPosts(c); err != nil {
		return err
	}
	// What the receiver sees: which endpoint, who sent it and when; no
	// secret, since it is stored and sent.
	data, err := json.Marshal(map[string]any{"endpoint_id": ep.ID, "sent_by": principalOf(c).name,
		"sent_at": time.Now().UTC().Format(time.RFC3339), "message": "a test event from hookflow"})
	if err != nil {
		return err
	}
	stored, err := s.ledger(c).TestEventInsert(c.Request().Context(), ep.ID, data)
	if err != nil {
		return err
	}
	traceEvent(c, stored.Event)
	return s.startAccepted(c, stored)
}
