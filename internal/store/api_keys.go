package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKey is a scoped key of the REST API (its secret is never kept).
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

func scanAPIKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.ID, &k.Name, &k.Scopes, &k.CreatedAt, &k.RevokedAt)
	return k, translate(err)
}

// APIKeyInsert stores a key by the hash of its secret.
func (s *Store) APIKeyInsert(ctx context.Context, id, name string, scopes []string, hash []byte) (APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, s.q.APIKeyInsert, id, name, scopes, hash))
	if err != nil {
		return k, fmt.Errorf("insert api key: %w", err)
	}
	return k, nil
}

// APIKeyByHash returns the key whose secret hashes to hash, or ErrNotFound
// when there is none or it is revoked.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, s.q.APIKeyByHash, hash))
	if err != nil {
		return k, fmt.Errorf("look up api key: %w", err)
	}
	return k, nil
}

// APIKeyList returns every key, revoked ones included, oldest first.
func (s *Store) APIKeyList(ctx context.Context) ([]APIKey, error) {
	rows, err := s.pool.Query(ctx, s.q.APIKeyList)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) { return scanAPIKey(r) })
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// APIKeyRevoke revokes the key, or returns ErrNotFound.
func (s *Store) APIKeyRevoke(ctx context.Context, id string) (APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, s.q.APIKeyRevoke, id))
	if err != nil {
		return k, fmt.Errorf("revoke api key: %w", err)
	}
	return k, nil
}
