package api

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/store"
)

type keyCreateRequest struct {
	Name   *string  `json:"name"`
	Scopes []string `json:"scopes"`
}

// keyCreated is the one answer that shows a key.
type keyCreated struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Scopes    []string  `json:"scopes"`
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at"`
}

// keyCreate makes an API key and shows it once; only its hash is kept.
func (s *Server) keyCreate(c echo.Context) error {
	var req keyCreateRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if req.Name == nil || strings.TrimSpace(*req.Name) == "" {
		return fieldProblem("name", "name is required: who or what uses the key (it is the by of its replays and skips)")
	}
	name := strings.TrimSpace(*req.Name)
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
	if len(req.Scopes) == 0 {
		return fieldProblem("scopes", "scopes must name at least one of "+scopeList())
	}
	var scopes []string
	for _, sc := range req.Scopes {
		if !slices.Contains(Scopes(), Scope(sc)) {
			return fieldProblem("scopes", "unknown scope "+sc+"; scopes are "+scopeList())
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	key, id, err := newKey()
	if err != nil {
		return err
	}
	k, err := s.deps.Store.APIKeyInsert(c.Request().Context(), id, name, scopes, hashKey(key))
	if err != nil {
		return err
	}
	s.deps.Logger.Info("api key created", "key_id", k.ID, "name", k.Name, "scopes", k.Scopes, "by", principalOf(c).name)
	return c.JSON(http.StatusCreated, keyCreated{ID: k.ID, Name: k.Name, Scopes: k.Scopes, Key: key, CreatedAt: k.CreatedAt})
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

func scopeList() string {
	var s []string
	for _, sc := range Scopes() {
		s = append(s, string(sc))
	}
	return strings.Join(s, ", ")
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

func (s *Server) keyList(c echo.Context) error {
	keys, err := s.deps.Store.APIKeyList(c.Request().Context())
	if err != nil {
		return err
	}
	if keys == nil {
		keys = []store.APIKey{}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": keys})
}

// keyRevoke revokes a key; from the next request on, every API process
// refuses it.
func (s *Server) keyRevoke(c echo.Context) error {
	id := c.Param("id")
	if p := validKey("id", id); p != nil {
		return p
	}
	k, err := s.deps.Store.APIKeyRevoke(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no API key "+id)
	}
	if err != nil {
		return err
	}
	s.deps.Logger.Info("api key revoked", "key_id", k.ID, "name", k.Name, "by", principalOf(c).name)
	return c.JSON(http.StatusOK, k)
}
