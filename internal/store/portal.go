package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// Portal sessions: a tenant's backend opens one for one of its
// people; its link's code is exchanged once for a bearer token that acts
// on the tenant's /v1 routes. The store keeps only the hashes of the code
// and of the token. Creating and revoking bind the store's tenant; the
// exchange and the token's lookup find the session by hash, on any store
// (the hash is what tells the tenant, as for API keys).

// PortalSession is a portal session as the ledger holds it.
type PortalSession struct {
	TenantID     string
	ID           string
	Actor        string
	Capabilities []string
	// EndpointIDs are the endpoints it is limited to when EndpointsLimited
	// (none left, if they were deleted: it reaches none).
	EndpointsLimited bool
	EndpointIDs      []string
	ReturnURL        string
	CodeExpiresAt    time.Time
	ExchangedAt      *time.Time
	ExpiresAt        time.Time
	RevokedAt        *time.Time
	CreatedBy        string
	CreatedAt        time.Time
}

// NewPortalSession is what PortalSessionCreate stores.
type NewPortalSession struct {
	ID           string
	Actor        string
	Capabilities []string
	// EndpointIDs limits the session to these endpoints; nil is all of the
	// tenant's.
	EndpointIDs   []string
	ReturnURL     string
	CodeHash      []byte
	CodeExpiresAt time.Time
	ExpiresAt     time.Time
	CreatedBy     string
}

// UnknownEndpointsError refuses a session limited to endpoints that are
// not the tenant's (or are deleted): IDs names them.
type UnknownEndpointsError struct{ IDs []string }

func (e *UnknownEndpointsError) Error() string {
	return fmt.Sprintf("no endpoints %v", e.IDs)
}

// Unwrap makes it ErrNotFound to errors.Is.
func (e *UnknownEndpointsError) Unwrap() error { return ErrNotFound }

// Why a code was not exchanged, or a token is refused (PortalExchange,
// PortalSessionByToken); each wraps ErrNotFound, as an unknown one is.
var (
	ErrPortalCodeUsed      = fmt.Errorf("portal code already used: %w", ErrNotFound)
	ErrPortalCodeExpired   = fmt.Errorf("portal code expired: %w", ErrNotFound)
	ErrPortalSessionEnded  = fmt.Errorf("portal session expired: %w", ErrNotFound)
	ErrPortalRevoked       = fmt.Errorf("portal session revoked: %w", ErrNotFound)
	ErrPortalTenantOff     = fmt.Errorf("portal session's tenant is disabled: %w", ErrNotFound)
	errPortalUnboundTenant = errors.New("portal session: the store is bound to no tenant")
)

// portalRow is every query's row of a session: sqlc makes one type per
// query, all of these columns in this order.
type portalRow = dbsqlc.PortalSessionInsertRow

func portalOf(r portalRow, endpoints []string) PortalSession {
	return PortalSession{TenantID: r.TenantID, ID: r.ID, Actor: r.Actor, Capabilities: r.Capabilities, EndpointsLimited: r.EndpointsLimited,
		EndpointIDs: endpoints, ReturnURL: r.ReturnUrl, CodeExpiresAt: r.CodeExpiresAt, ExchangedAt: r.CodeUsedAt, ExpiresAt: r.ExpiresAt,
		RevokedAt: r.RevokedAt, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

// PortalSessionCreate stores a new session of the store's tenant. When it
// is limited to endpoints, each must be the tenant's and not deleted, or
// nothing is stored and the error is an *UnknownEndpointsError.
func (s *Store) PortalSessionCreate(ctx context.Context, n NewPortalSession) (PortalSession, error) {
	if s.tenant == "" {
		return PortalSession{}, errPortalUnboundTenant
	}
	var out PortalSession
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		limited := n.EndpointIDs != nil
		if limited {
			known, err := q.PortalEndpointsKnown(ctx, dbsqlc.PortalEndpointsKnownParams{TenantID: s.tenant, EndpointIds: n.EndpointIDs})
			if err != nil {
				return err
			}
			var unknown []string
			for _, id := range n.EndpointIDs {
				if !slices.Contains(known, id) && !slices.Contains(unknown, id) {
					unknown = append(unknown, id)
				}
			}
			if len(unknown) > 0 {
				return &UnknownEndpointsError{IDs: unknown}
			}
		}
		r, err := q.PortalSessionInsert(ctx, dbsqlc.PortalSessionInsertParams{TenantID: s.tenant, ID: n.ID, Actor: n.Actor,
			Capabilities: n.Capabilities, EndpointsLimited: limited, ReturnUrl: n.ReturnURL, CodeHash: n.CodeHash,
			CodeExpiresAt: n.CodeExpiresAt, ExpiresAt: n.ExpiresAt, CreatedBy: n.CreatedBy})
		if err != nil {
			return err
		}
		var eps []string
		if limited {
			if err := q.PortalSessionEndpointsInsert(ctx, dbsqlc.PortalSessionEndpointsInsertParams{TenantID: s.tenant, SessionID: n.ID,
				EndpointIds: n.EndpointIDs}); err != nil {
				return err
			}
			eps = uniqueSorted(n.EndpointIDs)
		}
		out = portalOf(r, eps)
		return nil
	})
	if err != nil {
		return PortalSession{}, fmt.Errorf("create portal session: %w", translate(err))
	}
	return out, nil
}

func uniqueSorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// PortalExchange exchanges the code whose hash is codeHash for the token
// whose hash is tokenHash, and answers the session. A code is exchanged
// once: a used one is ErrPortalCodeUsed, one past its minute
// ErrPortalCodeExpired, a revoked or ended session's ErrPortalRevoked or
// ErrPortalSessionEnded, a disabled tenant's ErrPortalTenantOff, an unknown
// one ErrNotFound. The exchange is one statement: of two processes racing
// on one code, one wins and the other reads it used.
func (s *Store) PortalExchange(ctx context.Context, codeHash, tokenHash []byte) (PortalSession, error) {
	r, err := s.q.PortalSessionExchange(ctx, dbsqlc.PortalSessionExchangeParams{CodeHash: codeHash, TokenHash: tokenHash})
	if err == nil {
		sess := portalOf(portalRow(r), nil)
		if sess.EndpointsLimited {
			if sess.EndpointIDs, err = s.q.PortalSessionEndpoints(ctx, dbsqlc.PortalSessionEndpointsParams{TenantID: sess.TenantID, SessionID: sess.ID}); err != nil {
				return PortalSession{}, fmt.Errorf("exchange portal code: %w", err)
			}
		}
		return sess, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return PortalSession{}, fmt.Errorf("exchange portal code: %w", err)
	}
	// Not exchanged: say why, from the row as it is now.
	w, err := s.q.PortalSessionByCode(ctx, codeHash)
	if err != nil {
		return PortalSession{}, fmt.Errorf("exchange portal code: %w", translate(err))
	}
	now := time.Now()
	switch {
	case w.RevokedAt != nil:
		return PortalSession{}, ErrPortalRevoked
	case w.CodeUsedAt != nil:
		return PortalSession{}, ErrPortalCodeUsed
	case w.TenantDisabled:
		return PortalSession{}, ErrPortalTenantOff
	case !w.ExpiresAt.After(now):
		return PortalSession{}, ErrPortalSessionEnded
	default:
		// Its minute is over (the statement's clock said so; this one
		// may lag it by a little, which changes nothing).
		return PortalSession{}, ErrPortalCodeExpired
	}
}

// PortalSessionByToken returns the standing session whose token hashes to
// hash, with the endpoints it is limited to. Like a key's, it is read on
// every request, so a revocation holds from the next one in every API
// process. A revoked session is ErrPortalRevoked, an ended one
// ErrPortalSessionEnded (on the database's clock), a disabled tenant's
// ErrPortalTenantOff, an unknown token ErrNotFound.
func (s *Store) PortalSessionByToken(ctx context.Context, hash []byte) (PortalSession, error) {
	r, err := s.q.PortalSessionByToken(ctx, hash)
	if err != nil {
		return PortalSession{}, fmt.Errorf("look up portal session: %w", translate(err))
	}
	switch {
	case r.RevokedAt != nil:
		return PortalSession{}, ErrPortalRevoked
	case r.Expired:
		return PortalSession{}, ErrPortalSessionEnded
	case r.TenantDisabled:
		return PortalSession{}, ErrPortalTenantOff
	}
	sess := PortalSession{TenantID: r.TenantID, ID: r.ID, Actor: r.Actor, Capabilities: r.Capabilities, EndpointsLimited: r.EndpointsLimited,
		ReturnURL: r.ReturnUrl, CodeExpiresAt: r.CodeExpiresAt, ExchangedAt: r.CodeUsedAt, ExpiresAt: r.ExpiresAt, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt}
	if sess.EndpointsLimited {
		sess.EndpointIDs = r.EndpointIds
	}
	return sess, nil
}

// PortalSessionRevoke revokes session id of the store's tenant, or returns
// ErrNotFound; revoking twice keeps the first time.
func (s *Store) PortalSessionRevoke(ctx context.Context, id string) (PortalSession, error) {
	r, err := s.q.PortalSessionRevoke(ctx, dbsqlc.PortalSessionRevokeParams{TenantID: s.tenant, ID: id})
	if err != nil {
		return PortalSession{}, fmt.Errorf("revoke portal session: %w", translate(err))
	}
	sess := portalOf(portalRow(r), nil)
	if sess.EndpointsLimited {
		if sess.EndpointIDs, err = s.q.PortalSessionEndpoints(ctx, dbsqlc.PortalSessionEndpointsParams{TenantID: s.tenant, SessionID: id}); err != nil {
			return PortalSession{}, fmt.Errorf("revoke portal session: %w", err)
		}
	}
	return sess, nil
}

// PortalSessionsRevokeActor revokes every standing session of actor of the
// store's tenant, and answers their ids.
func (s *Store) PortalSessionsRevokeActor(ctx context.Context, actor string) ([]string, error) {
	ids, err := s.q.PortalSessionsRevokeActor(ctx, dbsqlc.PortalSessionsRevokeActorParams{TenantID: s.tenant, Actor: actor})
	if err != nil {
		return nil, fmt.Errorf("revoke portal sessions of %s: %w", actor, err)
	}
	return ids, nil
}

// OnlyEndpoints is the store limited to the endpoints ids of its tenant's
// (a portal session limited to them): every other endpoint, its dead
// letters and its attempts read as ones that do not exist, listings leave
// them out, and a replay or skip of their dead letters claims nothing.
// An empty ids reaches no endpoint.
func (s *Store) OnlyEndpoints(ids []string) *Store {
	c := *s
	c.limited, c.only = true, slices.Clone(ids)
	if c.only == nil {
		c.only = []string{}
	}
	return &c
}

// reaches reports whether the store reaches endpoint id: every endpoint,
// unless OnlyEndpoints limited it.
func (s *Store) reaches(id string) bool {
	return !s.limited || slices.Contains(s.only, id)
}

// Reaches reports whether the store reaches endpoint id, for what the API
// reads from elsewhere than the ledger (a sequencer's lanes): every
// endpoint, unless OnlyEndpoints limited it.
func (s *Store) Reaches(id string) bool { return s.reaches(id) }

// onlyEndpoints is the endpoints a query is limited to: nil (NULL) for
// all of them.
func (s *Store) onlyEndpoints() []string {
	if !s.limited {
		return nil
	}
	return s.only
}
