package api

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oapi-codegen/nullable"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/eventtypes"
	"github.com/hookflow/hookflow/internal/filter"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	wire "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/kit/webhook"
)

// eventTypes reads a request's event_types: set is false when it left
// them out, and a nil list (null) is every type. A list is checked and rid
// of repeats (eventtypes.Normalize). Its error is a 422 naming the pattern
// at fault; the document has refused the rest (not a list of strings, an
// empty list, too many).
func eventTypes(sent nullable.Nullable[[]string]) (list []string, set bool, err error) {
	if !sent.IsSpecified() {
		return nil, false, nil
	}
	if sent.IsNull() {
		return nil, true, nil
	}
	list, err = eventtypes.Normalize(sent.MustGet())
	var fe *intake.FieldError
	if errors.As(err, &fe) {
		// Well-formed JSON whose patterns cannot be subscribed with: 422,
		// naming the pattern at fault.
		p := problem(http.StatusUnprocessableEntity, "invalid-event-types", "Invalid event types", fe.Detail)
		p.Field = fe.Field
		return nil, true, p
	}
	return list, true, err
}

// endpointFilter reads a request's filter: set is false when it left it
// out, and nil (null) is none. A filter is compiled (package filter) and
// kept in its canonical form; one that does not compile is a 422 naming
// the path at fault (filter.data.amount.$gt).
func endpointFilter(sent nullable.Nullable[json.RawMessage]) (raw json.RawMessage, set bool, err error) {
	if !sent.IsSpecified() {
		return nil, false, nil
	}
	if sent.IsNull() {
		return nil, true, nil
	}
	f, err := filter.Compile(sent.MustGet())
	var fe *intake.FieldError
	if errors.As(err, &fe) {
		p := problem(http.StatusUnprocessableEntity, "invalid-filter", "Invalid filter", fe.Detail)
		p.Field = fe.Field
		return nil, true, p
	}
	if err != nil {
		return nil, true, err
	}
	return f.Raw(), true, nil
}

// endpointView is what the API shows of an endpoint. Its URL may carry a
// token in its query string (for receivers that cannot check signatures)
// or in its path (Slack- and Discord-style URLs): only the endpoint's
// management (endpoints:write, admin) sees it whole, anyone else
// (events:read) sees it without query, fragment and userinfo, and without
// its path unless the endpoint says its path is public.
func endpointView(c echo.Context, e store.Endpoint) wire.Endpoint {
	u := e.URL
	if !principalOf(c).can(ScopeEndpointsWrite) {
		u = redact.RawURL(u, e.Settings.URLPathPublic)
	}
	v := wire.Endpoint{ID: e.ID, Type: wire.EndpointType(e.Type), URL: u, URLPathPublic: e.Settings.URLPathPublic, Disabled: e.Disabled, DisabledReason: deref(e.DisabledReason),
		EventTypes: e.EventTypes, PreviousSecretExpiresAt: deref(e.PreviousExpiresAt(time.Now())), CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	viewSettings(&v, e.Settings)
	v.Filter = e.Filter
	if len(e.Config) > 0 {
		// Stored from a JSON object the API checked: it reads back as one.
		_ = json.Unmarshal(e.Config, &v.Config)
	}
	v.Credentials = credentialNames(e.Credentials)
	return v
}

// endpointWithSecret is the view that shows the signing secret: the answer
// of a create and of a rotation. The document makes it the view and the
// secret (allOf), which it is here too: the view's JSON, read back with
// the secret beside it.
func endpointWithSecret(c echo.Context, e store.Endpoint) (wire.EndpointWithSecret, error) {
	var v wire.EndpointWithSecret
	raw, err := json.Marshal(endpointView(c, e))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, err
	}
	v.Secret = e.Secret
	return v, nil
}

// checkURL checks the URL u of an endpoint of type typ of tenant t through
// the type's transport, as the tenant's attempts are judged (for a
// webhook, the targets policy as it applies to t, egress.Policy.ForTenant):
// a target only the allowlist lets through, for a tenant not granted it,
// is refused naming the limit, as the attempts would refuse it at dial.
func (s *Server) checkURL(ctx context.Context, t store.Tenant, typ, u string) *Problem {
	tr, err := s.deps.Transports.Lookup(typ)
	if err != nil {
		// The document let the type through, and this API serves none.
		p := fieldProblem("type", err.Error())
		p.Status = http.StatusUnprocessableEntity
		return p
	}
	granted := t.Limits.PrivateTargets(t.ID)
	err = tr.Validate(ctx, transport.Destination{URL: u, PrivateTargets: granted})
	if err == nil {
		return nil
	}
	p := fieldProblem("url", "url refused: "+err.Error())
	if !granted && tr.Validate(ctx, transport.Destination{URL: u, PrivateTargets: true}) == nil {
		p.Status = http.StatusUnprocessableEntity
		p.Detail = fmt.Sprintf("url refused: tenant %s may not use the private-target allowlist (its allow_private_targets)", t.ID)
		p.Extensions = map[string]any{"tenant_limit": "allow_private_targets", "tenant_id": t.ID}
	}
	return p
}

// EndpointCreate registers a receiver URL; the answer carries its secret.
func (s *Server) EndpointCreate(c echo.Context) error {
	var req wire.EndpointCreate
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if err := s.actOn(c, req.TenantID); err != nil {
		return err
	}
	tenant, err := s.tenants.get(c.Request().Context(), principalOf(c).tenant)
	if err != nil {
		return err
	}
	typ := cmp.Or(string(req.Type), transport.DefaultType)
	addr, config, p := s.checkDestination(c.Request().Context(), tenant, destinationCheck{typ: typ, url: req.URL, config: req.Config,
		credentials: req.Credentials, credentialsSet: req.Credentials != nil,
		webhookOnly: webhookOnly(req.Headers.IsSpecified(), req.URLPathPublic.IsSpecified())})
	if p != nil {
		return p
	}
	if req.Disabled != nil {
		return fieldProblem("disabled", "an endpoint is created enabled; PATCH it to disable")
	}
	types, _, err := eventTypes(req.EventTypes)
	if err != nil {
		return err
	}
	filterRaw, _, err := endpointFilter(req.Filter)
	if err != nil {
		return err
	}
	if err := s.checkOperationalSubscribers(c, "", types); err != nil {
		return err
	}
	ch, err := createSettings(req).change()
	if err != nil {
		return err
	}
	if err := tenantWindow(tenant, ch); err != nil {
		return err
	}
	settings := ch.Settings()
	// A broker's address holds no secret (its credentials are apart): its
	// path, the subject or stream, is shown.
	settings.URLPathPublic = (orNil(req.URLPathPublic) != nil && *orNil(req.URLPathPublic)) || config != nil
	secret, err := createSecret(req.Secret)
	if err != nil {
		return err
	}
	caps := store.Caps{Endpoints: s.cfg.MaxEndpoints, Subscribers: s.cfg.MaxSubscribers}
	if m := tenant.Limits.MaxEndpoints; m != nil {
		caps.Endpoints = int(*m)
	}
	ep, err := s.ledger(c).EndpointCreate(c.Request().Context(), store.Endpoint{
		ID: newID("ep_"), Type: typ, URL: addr, Secret: secret, EventTypes: types, Filter: filterRaw, Settings: settings, Config: config, Credentials: req.Credentials}, caps)
	if errors.Is(err, store.ErrDestinationTaken) {
		return destinationTakenProblem()
	}
	if p := subscribersProblem(err); p != nil {
		return p
	}
	if errors.Is(err, store.ErrEndpointLimit) {
		if tenant.Limits.MaxEndpoints != nil {
			p := problem(http.StatusUnprocessableEntity, "endpoint-limit", "Endpoint limit reached",
				fmt.Sprintf("tenant %s holds %d endpoints, its max_endpoints: delete one, or raise the tenant's limit", tenant.ID, caps.Endpoints))
			p.Extensions = map[string]any{"tenant_limit": "max_endpoints", "tenant_id": tenant.ID, "limit": caps.Endpoints}
			return p
		}
		p := problem(http.StatusUnprocessableEntity, "endpoint-limit", "Endpoint limit reached",
			fmt.Sprintf("tenant %s holds %d endpoints, the cap (HOOKFLOW_MAX_ENDPOINTS): delete one, or raise the setting", tenant.ID, caps.Endpoints))
		p.Extensions = map[string]any{"setting": "HOOKFLOW_MAX_ENDPOINTS", "limit": caps.Endpoints}
		return p
	}
	if err != nil {
		return err
	}
	view, err := endpointWithSecret(c, ep)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, view)
}

// checkOperationalSubscribers refuses event types that subscribe endpoint
// id ("" for a new one) to hookflow's operational events when as many
// other endpoints take them as HOOKFLOW_MAX_SUBSCRIBERS allows: an
// operational event cannot be refused at accept as a producer's is, so its
// subscribers are capped here. An endpoint of every type does not take
// them (store.OperationalEventInsert), and is not counted.
//
// A portal session limited to endpoints subscribes none to them (422): an
// operational event tells of another endpoint's events (a dead letter's
// event, correlation and receiver's answer), and its own endpoint's URL is
// the session's to point anywhere.
func (s *Server) checkOperationalSubscribers(c echo.Context, id string, types []string) error {
	if !slices.ContainsFunc(types, func(p string) bool { return strings.HasPrefix(p, contract.OperationalPrefix) }) {
		return nil
	}
	if p := principalOf(c).portal; p != nil && p.EndpointsLimited {
		pr := problem(http.StatusUnprocessableEntity, "endpoints-limited", "Operational events not for a limited session",
			"this portal session is limited to some endpoints: hookflow's operational events (hookflow.*) tell of the tenant's other endpoints, and are not its to subscribe to")
		pr.Field = "event_types"
		return pr
	}
	n, err := s.ledger(c).EndpointsOperationalCount(c.Request().Context(), id)
	if err != nil || n < s.cfg.MaxSubscribers {
		return err
	}
	p := tooManySubscribers("hookflow.*", s.cfg.MaxSubscribers)
	p.Field = "event_types"
	p.Detail = fmt.Sprintf("%d endpoints take hookflow's operational events already, the cap on the endpoints one event goes to (HOOKFLOW_MAX_SUBSCRIBERS): unsubscribe one, or raise the setting", n)
	return p
}

// subscribersProblem answers a create or change of event_types that would
// route some type to more endpoints than HOOKFLOW_MAX_SUBSCRIBERS allows
// (store.SubscribersError), or nil for any other err: refused here, so
// that one endpoint too many does not make every event of its types
// answer too-many-subscribers at accept, which stays the backstop.
func subscribersProblem(err error) *Problem {
	var se *store.SubscribersError
	if !errors.As(err, &se) {
		return nil
	}
	p := problem(http.StatusUnprocessableEntity, "too-many-subscribers", "Too many subscribers",
		fmt.Sprintf("%d other endpoints are subscribed to a type these event_types match, and %d is the cap on the endpoints one event goes to (HOOKFLOW_MAX_SUBSCRIBERS): narrow event_types, unsubscribe another endpoint, or raise the setting", se.Others, se.Max))
	p.Field = "event_types"
	p.Extensions = map[string]any{"setting": "HOOKFLOW_MAX_SUBSCRIBERS", "limit": se.Max}
	return p
}

// The bounds of a secret brought to POST /v1/endpoints, in key bytes: the
// kit's floor, and a ceiling far above what HMAC-SHA256 can use.
const (
	secretMinBytes = 24
	secretMaxBytes = 64
)

// createSecret is the new endpoint's signing secret: the one the request
// brings, checked, or a fresh one.
func createSecret(brought *string) (string, error) {
	if brought == nil {
		return webhook.NewSecret()
	}
	key, err := webhook.DecodeSecret(*brought)
	if err != nil || len(key) > secretMaxBytes {
		p := fieldProblem("secret", fmt.Sprintf("secret must be %s followed by the standard base64 of %d to %d random bytes; leave it out for one hookflow makes", webhook.SecretPrefix, secretMinBytes, secretMaxBytes))
		p.Status = http.StatusUnprocessableEntity
		return "", p
	}
	return *brought, nil
}

func (s *Server) endpoint(c echo.Context, id string) (store.Endpoint, error) {
	ep, err := s.ledger(c).EndpointGet(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return ep, problem(http.StatusNotFound, "not-found", "Not Found", "no endpoint "+id)
	}
	return ep, err
}

// EndpointGet answers an endpoint, without its secret.
func (s *Server) EndpointGet(c echo.Context, id wire.Key, _ wire.EndpointGetParams) error {
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointView(c, ep))
}

func (s *Server) EndpointUpdate(c echo.Context, id wire.Key, _ wire.EndpointUpdateParams) error {
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	// The document refuses an empty PATCH (minProperties) and a secret
	// (set at creation only).
	var req wire.EndpointUpdate
	if err := s.decode(c, &req); err != nil {
		return err
	}
	types, typesSet, typesErr := eventTypes(req.EventTypes)
	filterRaw, filterSet, filterErr := endpointFilter(req.Filter)
	tenant, err := s.tenants.get(c.Request().Context(), principalOf(c).tenant)
	if err != nil {
		return err
	}
	var config json.RawMessage
	wo := webhookOnly(req.Headers.IsSpecified(), req.URLPathPublic.IsSpecified())
	if req.URL != nil || req.Config != nil || req.Credentials != nil || (len(wo) > 0 && len(ep.Config) > 0) {
		d := destinationCheck{typ: ep.Type, url: deref(req.URL), config: req.Config, credentials: req.Credentials, credentialsSet: req.Credentials != nil,
			webhookOnly: wo}
		if d.config == nil && d.url == "" && len(ep.Config) > 0 {
			// New credentials alone are checked against the stored config.
			if err := json.Unmarshal(ep.Config, &d.config); err != nil {
				return err
			}
		}
		addr, cfg, p := s.checkDestination(c.Request().Context(), tenant, d)
		if p != nil {
			return p
		}
		if req.URL != nil || req.Config != nil {
			req.URL, config = &addr, cfg
		}
	}
	if err := cmp.Or(typesErr, filterErr); err != nil {
		return err
	}
	if typesSet {
		if err := s.checkOperationalSubscribers(c, ep.ID, types); err != nil {
			return err
		}
	}
	ch, err := updateSettings(req).change()
	if err != nil {
		return err
	}
	if err := tenantWindow(tenant, ch); err != nil {
		return err
	}
	ch.URL, ch.Disabled, ch.URLPathPublic = req.URL, req.Disabled, orNil(req.URLPathPublic)
	ch.Config = config
	if config != nil {
		ch.URLPathPublic = new(true) // as at creation
	}
	if req.Credentials != nil {
		ch.Credentials = &req.Credentials
	}
	if typesSet {
		ch.EventTypes = &types
	}
	if filterSet {
		ch.Filter = &filterRaw
	}
	who := principalOf(c)
	ch.By = store.Actor{ID: who.id, Name: who.name}
	ch.MaxSubscribers = s.cfg.MaxSubscribers
	ep, err = s.ledger(c).EndpointUpdate(c.Request().Context(), ep.ID, ch)
	if errors.Is(err, store.ErrHeadersOrigin) {
		return headersOriginProblem()
	}
	if errors.Is(err, store.ErrCredentialsAddress) {
		return unprocessable("credentials", "this config moves the destination to another address: send credentials in the same request (the ones for the new address, or {} for none)")
	}
	if errors.Is(err, store.ErrDestinationTaken) {
		return destinationTakenProblem()
	}
	if p := subscribersProblem(err); p != nil {
		return p
	}
	if err != nil {
		return err
	}
	view := endpointView(c, ep)
	if req.Disabled != nil && !*req.Disabled {
		// Its old failures would disable it again at the next one (and
		// keep its circuit open): it starts afresh, and an open circuit's
		// outage is auto-replayed when the endpoint has auto_replay. Done
		// whether or not the read above saw it disabled: the breaker may
		// have disabled it since, and a repeat of a PATCH that failed
		// after enabling it must finish what that one began. On an
		// endpoint that was enabled it closes an open circuit and replays
		// nothing but a straggler of an earlier disabling.
		if err := s.ledger(c).CircuitReset(c.Request().Context(), ep.ID, ep.Settings.AutoReplay); err != nil {
			return err
		}
		resumed, err := s.resumeEndpoint(c, ep.ID)
		if err != nil {
			return err
		}
		view.ResumedDeadLetters = int64(resumed)
	}
	return c.JSON(http.StatusOK, view)
}

// destinationTakenProblem refuses a broker destination another endpoint
// writes to: both would write the same lanes, and each would refuse the
// other's messages (transport.Decide).
func destinationTakenProblem() *Problem {
	p := problem(http.StatusUnprocessableEntity, "destination-taken", "Destination taken",
		"another endpoint delivers to this destination already: give each endpoint a subject, stream or exchange of its own")
	p.Field = "config"
	return p
}

// headersOriginProblem refuses a PATCH that moves an endpoint with custom
// headers to another origin (scheme, host or port) without sending headers
// again. Their values are secrets the receiver at the old origin checks;
// carried over, they would go to whoever the new URL names, and an
// endpoints:write key, which is shown them as "********", could read them
// there. Refused rather than cleared, so that nothing is lost unseen: the
// caller sends the headers meant for the new receiver, or null for none.
func headersOriginProblem() *Problem {
	p := problem(http.StatusUnprocessableEntity, "headers-follow-url", "Headers must be sent again",
		"this url has another origin (scheme, host or port) than the endpoint's, and the endpoint has custom headers: send headers in the same request (the values for the new receiver, or null for none)")
	p.Field = "headers"
	return p
}

// EndpointURLChanges lists the endpoint's URL changes, newest first
// (admin): the audit of who pointed it where. Bounded as a page of
// endpoints is.
func (s *Server) EndpointURLChanges(c echo.Context, id wire.Key, q wire.EndpointURLChangesParams) error {
	limit, p := queryLimit(q.Limit, endpointPageDefault, endpointPageMax)
	if p != nil {
		return p
	}
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	changes, err := s.ledger(c).EndpointURLChanges(c.Request().Context(), ep.ID, limit)
	if err != nil {
		return err
	}
	// Who and when, and the URLs before and after, redacted as a read-only
	// key is shown them.
	out := wire.URLChangePage{Items: make([]wire.URLChange, 0, len(changes))}
	for _, ch := range changes {
		out.Items = append(out.Items, wire.URLChange{ChangedAt: ch.At, ChangedBy: ch.By.Name, ChangedByKeyID: ch.By.ID,
			OldURL: ch.OldURL, NewURL: ch.NewURL, HeadersReplaced: ch.HeadersReplaced})
	}
	return c.JSON(http.StatusOK, out)
}

// resumeEndpoint replays, each lane in sequence order, the open dead letters
// that the endpoint's being disabled caused (an attempt refused because it
// was disabled, or the 410 that disabled it): a disabled endpoint loses
// nothing, its deliveries wait in their lanes and go on, in order, once it
// is enabled. Dead letters of other causes wait for an operator as ever.
// It returns how many it replayed.
func (s *Server) resumeEndpoint(c echo.Context, endpointID string) (int, error) {
	f := store.DeadLetterFilter{EndpointID: endpointID, Status: store.DeadLetterOpen, Limit: s.cfg.ReplayPageSize}
	return s.replayEach(c, f, contract.EndpointEnabledBy, func(d store.DeadLetter) bool { return contract.DisablingCaused(d.Reason) })
}

// EndpointRotateSecret gives the endpoint a new signing secret; the old one
// keeps signing for RouterConfig.SecretGrace.
func (s *Server) EndpointRotateSecret(c echo.Context, id wire.Key, _ wire.EndpointRotateSecretParams) error {
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return err
	}
	ep, err = s.ledger(c).EndpointRotateSecret(c.Request().Context(), ep.ID, secret, s.cfg.SecretGrace)
	if err != nil {
		return err
	}
	view, err := endpointWithSecret(c, ep)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, view)
}

// EndpointDelete deletes an endpoint for good (endpoints:write): routing to
// it stops at once, and it answers 404 from then on, to every route. Its
// deliveries still open end skipped, recorded with who deleted it: its open
// dead letters here (a skip of each, as an operator's, noted "endpoint
// deleted"), the rest as each comes to its attempt, which sends nothing.
// The dead letter rows stay, skipped, for the audit. Its lanes then hold
// nothing back at the other endpoints (they never did) nor in its own.
func (s *Server) EndpointDelete(c echo.Context, id wire.Key, _ wire.EndpointDeleteParams) error {
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	by := principalOf(c).name
	if err := s.ledger(c).EndpointDelete(ctx, ep.ID, by); errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no endpoint "+ep.ID)
	} else if err != nil {
		return err
	}
	s.deps.Metrics.ForgetEndpoint(ep.ID)
	n, err := s.deps.Starter.SkipDeletedDeadLetters(ctx, principalOf(c).tenant, ep.ID, by)
	if err != nil {
		// Deleted all the same: the sweep skips what is left.
		s.deps.Logger.Warn("skip a deleted endpoint's dead letters; the sweep finishes", "endpoint_id", ep.ID, "skipped", n, "error", err)
	}
	// The endpoint, by whom, and how many of its open dead letters it
	// skipped (the sweep skips any it could not, and any written while it
	// ran).
	return c.JSON(http.StatusOK, wire.EndpointDeleted{ID: ep.ID, Deleted: true, DeletedBy: by, SkippedDeadLetters: int64(n)})
}

const (
	endpointPageDefault = 50
	endpointPageMax     = 500
)

// idCursor is the id (an endpoint's, a tenant's) a page in id order starts after: the
// cursor query parameter decoded ("" without one).
func idCursor(cursor *string) (string, *Problem) {
	return nameCursor(cursor, intake.ValidKey)
}

// EndpointList is a page of endpoints in id order. Its cursor is opaque
// (the last id of the page, encoded), so the order may change later
// without breaking a client's loop.
func (s *Server) EndpointList(c echo.Context, q wire.EndpointListParams) error {
	limit, p := queryLimit(q.Limit, endpointPageDefault, endpointPageMax)
	if p != nil {
		return p
	}
	after, p := idCursor(q.Cursor)
	if p != nil {
		return p
	}
	// One more than the page says whether another follows, so the last
	// page has no cursor and no client asks for an empty one.
	eps, err := s.ledger(c).EndpointsList(c.Request().Context(), after, limit+1)
	if err != nil {
		return err
	}
	page := wire.EndpointPage{Items: make([]wire.Endpoint, 0, min(len(eps), limit))}
	if len(eps) > limit {
		eps = eps[:limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(eps[limit-1].ID))
	}
	for _, e := range eps {
		page.Items = append(page.Items, endpointView(c, e))
	}
	return c.JSON(http.StatusOK, page)
}

// tenantWindow refuses a recovery_window past the tenant's
// max_recovery_window.
func tenantWindow(t store.Tenant, ch store.EndpointChange) error {
	max := t.Limits.MaxRecoveryWindow
	if max == nil || ch.RecoveryWindow == nil || *ch.RecoveryWindow <= *max {
		return nil
	}
	p := fieldProblem("recovery_window", fmt.Sprintf("tenant %s allows a recovery_window of at most %s (its max_recovery_window)", t.ID, *max))
	p.Status = http.StatusUnprocessableEntity
	p.Extensions = map[string]any{"tenant_limit": "max_recovery_window", "tenant_id": t.ID}
	return p
}
