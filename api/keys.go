package api

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// APIKeyCreate makes an API key and shows it once; only its hash is kept.
// With tenant_id it is a tenant's key, which tenants:write may issue and
// which holds only tenantScopes; without, an operator key, which takes
// admin to issue.
func (s *Server) APIKeyCreate(c echo.Context) error {
	var req wire.APIKeyCreate
	if err := s.decode(c, &req); err != nil {
		return err
	}
	var tenant *string
	if req.TenantID != "" {
		if _, err := s.tenants.get(c.Request().Context(), req.TenantID); err != nil {
			return err
		}
		for _, sc := range req.Scopes {
			if !slices.Contains(tenantScopes, sc) {
				p := problem(http.StatusUnprocessableEntity, "invalid-field", "Invalid request field",
					fmt.Sprintf("a tenant's key may hold only %s, not %s", joinScopes(tenantScopes), sc))
				p.Field = "scopes"
				return p
			}
		}
		tenant = &req.TenantID
	} else if !principalOf(c).can(ScopeAdmin) {
		return scopeProblem(ScopeAdmin, "an operator key (no tenant_id) takes admin to issue; tenants:write issues tenants' keys")
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		return fieldProblem("name", "name is required: who or what uses the key (it is the by of its replays and skips)")
	}
	// The name is the by of the key's replays and skips, read in terminals
	// and logs: no control or format characters.
	if len(name) > 100 || printable.String(name) != name {
		return fieldProblem("name", "name must be at most 100 printable characters")
	}
	if reservedName(name) {
		p := problem(http.StatusUnprocessableEntity, "reserved-name", "Reserved name",
			fmt.Sprintf("the name %q is reserved: %q is the bootstrap token's, and names starting with %q are hookflow's own", name, bootstrapName, reservedPrefix))
		p.Field = "name"
		return p
	}
	// The document requires one scope or more, each one it lists.
	var scopes []string
	for _, sc := range req.Scopes {
		if !slices.Contains(scopes, string(sc)) {
			scopes = append(scopes, string(sc))
		}
	}
	key, id, err := newKey()
	if err != nil {
		return err
	}
	k, err := s.deps.Store.APIKeyInsert(c.Request().Context(), id, name, scopes, hashKey(key), tenant)
	if err != nil {
		return err
	}
	s.deps.Logger.Info("api key created", "key_id", k.ID, "name", k.Name, "scopes", k.Scopes, "tenant_id", deref(k.TenantID), "by", principalOf(c).name)
	// The one answer that shows a key.
	view := apiKeyView(k)
	return c.JSON(http.StatusCreated, wire.APIKeyCreated{ID: view.ID, Name: view.Name, Scopes: view.Scopes, Key: key, CreatedAt: view.CreatedAt,
		TenantID: view.TenantID})
}

// reservedPrefix starts the names hookflow acts under itself (its
// auto-replay is "hookflow (auto-replay)").
const reservedPrefix = "hookflow"

// reservedName reports whether name, compared without case, is one a key
// may not take: a replay's or skip's by must tell who did it.
func reservedName(name string) bool {
	n := strings.ToLower(name)
	return n == bootstrapName || strings.HasPrefix(n, reservedPrefix)
}

// keyBytes is a key's randomness, keyTextLen its length in base64url.
const (
	keyBytes   = 32
	keyTextLen = (keyBytes*8 + 5) / 6
)

// newKey makes a key (KeyPrefix and 256 random bits) and its ID.
func newKey() (key, id string, err error) {
	b := make([]byte, keyBytes+9)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:keyBytes]), "key_" + strings.ToLower(base64.RawURLEncoding.EncodeToString(b[keyBytes:])), nil
}

// APIKeyList answers every API key, revoked ones included.
func (s *Server) APIKeyList(c echo.Context) error {
	keys, err := s.deps.Store.APIKeyList(c.Request().Context())
	if err != nil {
		return err
	}
	page := wire.APIKeyPage{Items: make([]wire.APIKey, 0, len(keys))}
	for _, k := range keys {
		page.Items = append(page.Items, apiKeyView(k))
	}
	return c.JSON(http.StatusOK, page)
}

// APIKeyRevoke revokes a key; from the next request on, every API process
// refuses it.
func (s *Server) APIKeyRevoke(c echo.Context, id wire.Key) error {
	k, err := s.deps.Store.APIKeyRevoke(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no API key "+id)
	}
	if err != nil {
		return err
	}
	s.deps.Logger.Info("api key revoked", "key_id", k.ID, "name", k.Name, "by", principalOf(c).name)
	return c.JSON(http.StatusOK, apiKeyView(k))
}

// apiKeyView is a key as the API shows it: never the key itself, which is
// kept only as its hash.
func apiKeyView(k store.APIKey) wire.APIKey {
	v := wire.APIKey{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt, RevokedAt: deref(k.RevokedAt), Scopes: make([]Scope, 0, len(k.Scopes)),
		TenantID: deref(k.TenantID)}
	for _, sc := range k.Scopes {
		v.Scopes = append(v.Scopes, Scope(sc))
	}
	return v
}
