package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// capProblem is a cap's refusal: the problem names the setting and its
// value.
type capProblem struct {
	Type    string `json:"type"`
	Status  int    `json:"status"`
	Detail  string `json:"detail"`
	Field   string `json:"field"`
	Setting string `json:"setting"`
	Limit   int    `json:"limit"`
}

// TestFanOutCaps (the fan-out caps): with HOOKFLOW_MAX_ENDPOINTS=3 a fourth
// endpoint is refused, 422 endpoint-limit naming the setting, until one is
// deleted; with HOOKFLOW_MAX_SUBSCRIBERS=2 a PATCH that would make a third
// subscriber of a type is refused, 422 too-many-subscribers on
// event_types, and an event that three endpoints subscribe to all the
// same (the store changed behind the API) is refused at accept, 422
// too-many-subscribers naming the setting, and nothing of it is stored (no event, no sequence taken: the
// same sequence is accepted once the subscribers are back under the cap),
// while an event addressed to one endpoint, or one at the cap, is
// accepted and delivered to each subscriber.
func TestFanOutCaps(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxEndpoints: 3, maxSubscribers: 2})
	a := b.subscribe("order.*")
	c := b.subscribe("order.*")
	other := b.subscribe("invoice.*")

	var p capProblem
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/endpoints", map[string]any{"url": a.rcv.URL()}, &p))
	require.True(t, strings.HasSuffix(p.Type, "/endpoint-limit"), p.Type)
	require.Equal(t, "HOOKFLOW_MAX_ENDPOINTS", p.Setting)
	require.Equal(t, 3, p.Limit)
	require.Contains(t, p.Detail, "HOOKFLOW_MAX_ENDPOINTS")

	corr := b.id("order")
	ev := b.publish(corr+"-1", corr, 1, "order.created")
	require.ElementsMatch(t, []string{a.ID, c.ID}, ev.Endpoints(), "at the cap: accepted")

	// A third subscriber of order.* is refused where it subscribes.
	p = capProblem{}
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPatch, "/v1/endpoints/"+other.ID, map[string]any{"event_types": []string{"order.*", "invoice.*"}}, &p))
	require.True(t, strings.HasSuffix(p.Type, "/too-many-subscribers"), p.Type)
	require.Equal(t, "event_types", p.Field)
	require.Equal(t, "HOOKFLOW_MAX_SUBSCRIBERS", p.Setting)
	require.Equal(t, 2, p.Limit)
	// Past the cap all the same (as a deployment that lowered
	// HOOKFLOW_MAX_SUBSCRIBERS has it): the accept-time backstop refuses.
	_, err := b.store.EndpointUpdate(context.Background(), other.ID, store.EndpointChange{EventTypes: &[]string{"order.*", "invoice.*"}})
	require.NoError(t, err)
	p = capProblem{}
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/events", map[string]any{
		"id": corr + "-2", "correlation_id": corr, "sequence": 2, "type": "order.updated", "data": map[string]any{},
	}, &p))
	require.True(t, strings.HasSuffix(p.Type, "/too-many-subscribers"), p.Type)
	require.Equal(t, "HOOKFLOW_MAX_SUBSCRIBERS", p.Setting)
	require.Equal(t, 2, p.Limit)
	require.Equal(t, "type", p.Field)
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/events/"+corr+"-2", nil, nil), "never stored")

	// Addressed to one endpoint, the same type goes.
	var acc struct {
		Deliveries []delivery `json:"deliveries"`
	}
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/events", map[string]any{
		"id": corr + "-2", "correlation_id": corr, "sequence": 2, "type": "order.updated", "endpoint_id": a.ID, "data": map[string]any{},
	}, &acc), "the refused sequence was never taken")
	require.Len(t, acc.Deliveries, 1)

	// Back under the endpoint cap after a delete.
	require.Equal(t, http.StatusOK, b.call(http.MethodDelete, "/v1/endpoints/"+other.ID, nil, nil))
	b.createEndpointWith(map[string]any{"url": c.rcv.URL(), "event_types": []string{"invoice.*"}})

	b.waitDelivery(corr+"-1", a.ID, contract.StateDelivered, 30*time.Second)
	b.waitDelivery(corr+"-1", c.ID, contract.StateDelivered, 30*time.Second)
	b.waitDelivery(corr+"-2", a.ID, contract.StateDelivered, 30*time.Second)
	require.Equal(t, []int64{1, 2}, a.rcv.appliedTo(corr))
	require.Equal(t, []int64{1}, c.rcv.appliedTo(corr))
}

// TestOperationalSubscriberCap (the fan-out caps): hookflow's operational
// events cannot be refused at accept, so their subscribers are capped
// where they subscribe: with HOOKFLOW_MAX_SUBSCRIBERS=1, a second endpoint
// taking hookflow's types is refused, on create and on PATCH, 422
// too-many-subscribers naming the setting; one of every type is not
// counted (it is not sent them), and the one subscriber may change its
// own types.
func TestOperationalSubscriberCap(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxSubscribers: 1})
	op := b.subscribe("hookflow.*")
	every := b.subscribe()
	var p capProblem
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/endpoints",
		map[string]any{"url": op.rcv.URL(), "event_types": []string{"hookflow.dead_letter.*"}}, &p))
	require.True(t, strings.HasSuffix(p.Type, "/too-many-subscribers"), p.Type)
	require.Equal(t, "HOOKFLOW_MAX_SUBSCRIBERS", p.Setting)
	require.Equal(t, "event_types", p.Field)
	p = capProblem{}
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPatch, "/v1/endpoints/"+every.ID,
		map[string]any{"event_types": []string{contract.OpCircuitOpened}}, &p))
	require.Equal(t, "HOOKFLOW_MAX_SUBSCRIBERS", p.Setting)
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+op.ID,
		map[string]any{"event_types": []string{"hookflow.endpoint.*"}}, nil), "its own change")
}

// TestSubscriptionCap (a cap a review found missing): HOOKFLOW_MAX_SUBSCRIBERS
// is held where endpoints subscribe, not only at accept, so that one
// endpoint too many cannot make every event of its types answer 422. With
// a cap of 2 and one subscriber of order.created, two creates of order.*
// racing each other pass together never: one is created, the other is
// refused, 422 too-many-subscribers on event_types naming the setting and
// the cap. Endpoints that share no type are not added up (invoice.* and a
// third exact type are created), "*" and a PATCH onto order.created are
// refused, and order.created is accepted and routed to its two.
func TestSubscriptionCap(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxSubscribers: 2})
	first := b.subscribe("order.created")
	type answer struct {
		code int
		p    capProblem
		err  error
	}
	post := func(body map[string]any) answer {
		raw, err := json.Marshal(body)
		if err != nil {
			return answer{err: err}
		}
		req, err := http.NewRequest(http.MethodPost, b.apiURL+"/v1/endpoints", bytes.NewReader(raw))
		if err != nil {
			return answer{err: err}
		}
		req.Header.Set("Authorization", "Bearer "+b.cfg.APIToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.checked().Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		a := answer{code: resp.StatusCode}
		body2, err := io.ReadAll(resp.Body)
		if err == nil && a.code != http.StatusCreated {
			err = json.Unmarshal(body2, &a.p)
		}
		a.err = err
		return a
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() { answers <- post(map[string]any{"url": first.rcv.URL(), "event_types": []string{"order.*"}}) }()
	}
	a1, a2 := <-answers, <-answers
	require.NoError(t, a1.err)
	require.NoError(t, a2.err)
	codes := []int{a1.code, a2.code}
	require.ElementsMatch(t, []int{http.StatusCreated, http.StatusUnprocessableEntity}, codes, "exactly one of the racing creates")
	refused := a1.p
	if a2.code == http.StatusUnprocessableEntity {
		refused = a2.p
	}
	require.True(t, strings.HasSuffix(refused.Type, "/too-many-subscribers"), refused.Type)
	require.Equal(t, "event_types", refused.Field)
	require.Equal(t, "HOOKFLOW_MAX_SUBSCRIBERS", refused.Setting)
	require.Equal(t, 2, refused.Limit)

	inv := b.subscribe("invoice.*")
	b.subscribe("order.created.v2", "invoice.paid") // two subscribers each at most
	every := post(map[string]any{"url": first.rcv.URL(), "event_types": []string{"*"}})
	require.NoError(t, every.err)
	require.Equal(t, http.StatusUnprocessableEntity, every.code)
	require.Equal(t, "event_types", every.p.Field)
	var p capProblem
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPatch, "/v1/endpoints/"+inv.ID, map[string]any{"event_types": []string{"order.created"}}, &p))
	require.Equal(t, "HOOKFLOW_MAX_SUBSCRIBERS", p.Setting)
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+inv.ID, map[string]any{"event_types": []string{"invoice.paid", "invoice.*"}}, nil), "its own types are not counted against it")

	corr := b.id("order")
	ev := b.publish(corr+"-1", corr, 1, "order.created")
	require.Len(t, ev.Endpoints(), 2, "at the cap: accepted")
}
