package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
)

type endpointRequest struct {
	URL      *string `json:"url"`
	Disabled *bool   `json:"disabled"`
}

type endpointResponse struct {
	ID                string     `json:"id"`
	URL               string     `json:"url"`
	Secret            string     `json:"secret,omitempty"`
	Disabled          bool       `json:"disabled"`
	DisabledReason    *string    `json:"disabled_reason,omitempty"`
	PreviousExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
}

// endpointView is what the API shows of an endpoint. Its URL may carry a
// token in its query string (for receivers that cannot check signatures):
// only the endpoint's management (endpoints:write, admin) sees it whole,
// anyone else (events:read) sees it without query, fragment and userinfo.
func endpointView(c echo.Context, e store.Endpoint, withSecret bool) endpointResponse {
	u := e.URL
	if !principalOf(c).can(ScopeEndpointsWrite) {
		u = redact.RawURL(u)
	}
	r := endpointResponse{ID: e.ID, URL: u, Disabled: e.Disabled, DisabledReason: e.DisabledReason, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if withSecret {
		r.Secret = e.Secret
	}
	r.PreviousExpiresAt = e.PreviousExpiresAt(time.Now())
	return r
}

func (s *Server) checkURL(u string) *Problem {
	if err := s.cfg.Targets.CheckURL(u); err != nil {
		return fieldProblem("url", "url refused: "+err.Error())
	}
	return nil
}

func (s *Server) endpointCreate(c echo.Context) error {
	var req endpointRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if req.URL == nil {
		return fieldProblem("url", "url is required")
	}
	if p := s.checkURL(*req.URL); p != nil {
		return p
	}
	if req.Disabled != nil {
		return fieldProblem("disabled", "an endpoint is created enabled; PATCH it to disable")
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return err
	}
	ep, err := s.deps.Store.EndpointInsert(c.Request().Context(), newID("ep_"), *req.URL, secret)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, endpointView(c, ep, true))
}

func (s *Server) endpoint(c echo.Context) (store.Endpoint, error) {
	id := c.Param("id")
	if p := validKey("id", id); p != nil {
		return store.Endpoint{}, p
	}
	ep, err := s.deps.Store.EndpointGet(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return ep, problem(http.StatusNotFound, "not-found", "Not Found", "no endpoint "+id)
	}
	return ep, err
}

func (s *Server) endpointGet(c echo.Context) error {
	ep, err := s.endpoint(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointView(c, ep, false))
}

func (s *Server) endpointUpdate(c echo.Context) error {
	ep, err := s.endpoint(c)
	if err != nil {
		return err
	}
	var req endpointRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if req.URL == nil && req.Disabled == nil {
		return problem(http.StatusBadRequest, "empty-update", "Nothing to update", "send url and/or disabled")
	}
	if req.URL != nil {
		if p := s.checkURL(*req.URL); p != nil {
			return p
		}
	}
	ep, err = s.deps.Store.EndpointUpdate(c.Request().Context(), ep.ID, req.URL, req.Disabled, nil)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointView(c, ep, false))
}

func (s *Server) endpointRotate(c echo.Context) error {
	ep, err := s.endpoint(c)
	if err != nil {
		return err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return err
	}
	ep, err = s.deps.Store.EndpointRotateSecret(c.Request().Context(), ep.ID, secret, s.cfg.SecretGrace)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointView(c, ep, true))
}
