package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// APIKey is a scoped key of the REST API (its secret is never kept).
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// TenantID is the tenant a tenant's key is confined to; nil for an
	// operator key.
	TenantID *string `json:"tenant_id,omitempty"`
}

// APIKeyInsert stores a key by the hash of its secret: an operator key
// when tenant is nil, else one confined to that tenant.
func (s *Store) APIKeyInsert(ctx context.Context, id, name string, scopes []string, hash []byte, tenant *string) (APIKey, error) {
	k, err := s.q.APIKeyInsert(ctx, dbsqlc.APIKeyInsertParams{ID: id, Name: name, Scopes: scopes, KeyHash: hash, TenantID: tenant})
	if err != nil {
		return APIKey(k), fmt.Errorf("insert api key: %w", translate(err))
	}
	return APIKey(k), nil
}

// APIKeyByHash returns the key whose secret hashes to hash, or ErrNotFound
// when there is none, it is revoked, or its tenant is disabled.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (APIKey, error) {
	k, err := s.q.APIKeyByHash(ctx, hash)
	if err != nil {
		return APIKey{}, fmt.Errorf("look up api key: %w", translate(err))
	}
	if k.TenantDisabled {
		return APIKey{}, fmt.Errorf("look up api key: tenant %s is disabled: %w", orZero(k.TenantID), ErrNotFound)
	}
	return APIKey{ID: k.ID, Name: k.Name, Scopes: k.Scopes, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, TenantID: k.TenantID}, nil
}

// APIKeyList returns every key, revoked ones included, oldest first.
func (s *Store) APIKeyList(ctx context.Context) ([]APIKey, error) {
	rows, err := s.q.APIKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = APIKey(r)
	}
	return out, nil
}

// APIKeyRevoke revokes the key, or returns ErrNotFound.
func (s *Store) APIKeyRevoke(ctx context.Context, id string) (APIKey, error) {
	k, err := s.q.APIKeyRevoke(ctx, id)
	if err != nil {
		return APIKey(k), fmt.Errorf("revoke api key: %w", translate(err))
	}
	return APIKey(k), nil
}
