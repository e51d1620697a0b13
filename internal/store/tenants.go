package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// Tenant is one of the SaaS's customers: every ledger row belongs to one,
// and its keys reach only its own.
type Tenant struct {
	ID       string
	Name     string
	Metadata json.RawMessage
	Disabled bool
	Limits   TenantLimits
	Created  time.Time
	Updated  time.Time
}

// TenantLimits are a tenant's limits; nil is the server's default.
type TenantLimits struct {
	// EventsPerSecond bounds what the API accepts from the tenant, over
	// every key of its (and every operator key acting on it).
	EventsPerSecond *float64
	// MaxEndpoints bounds the tenant's endpoints not deleted
	// (HOOKFLOW_MAX_ENDPOINTS by default).
	MaxEndpoints *int32
	// MaxRecoveryWindow bounds the recovery_window its endpoints may set.
	MaxRecoveryWindow *time.Duration
}

func tenantOf(r dbsqlc.Tenant) Tenant {
	t := Tenant{ID: r.ID, Name: r.Name, Metadata: r.Metadata, Disabled: r.Disabled, Created: r.CreatedAt, Updated: r.UpdatedAt,
		Limits: TenantLimits{EventsPerSecond: r.EventsPerSecond, MaxEndpoints: r.MaxEndpoints}}
	if r.MaxRecoveryWindowMs != nil {
		d := time.Duration(*r.MaxRecoveryWindowMs) * time.Millisecond
		t.Limits.MaxRecoveryWindow = &d
	}
	return t
}

// TenantPut creates tenant t.ID, or replaces its name, metadata and limits
// (its disabled flag stays), and reports which.
func (s *Store) TenantPut(ctx context.Context, t Tenant) (Tenant, bool, error) {
	var window *int64
	if t.Limits.MaxRecoveryWindow != nil {
		ms := t.Limits.MaxRecoveryWindow.Milliseconds()
		window = &ms
	}
	meta := t.Metadata
	if len(meta) == 0 {
		meta = json.RawMessage(`{}`)
	}
	r, err := s.q.TenantPut(ctx, dbsqlc.TenantPutParams{ID: t.ID, Name: t.Name, Metadata: meta,
		EventsPerSecond: t.Limits.EventsPerSecond, MaxEndpoints: t.Limits.MaxEndpoints, MaxRecoveryWindowMs: window})
	if err != nil {
		return Tenant{}, false, fmt.Errorf("put tenant: %w", translate(err))
	}
	return tenantOf(dbsqlc.Tenant{ID: r.ID, Name: r.Name, Metadata: r.Metadata, Disabled: r.Disabled, EventsPerSecond: r.EventsPerSecond,
		MaxEndpoints: r.MaxEndpoints, MaxRecoveryWindowMs: r.MaxRecoveryWindowMs, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}), r.Created, nil
}

// TenantGet returns tenant id, or ErrNotFound.
func (s *Store) TenantGet(ctx context.Context, id string) (Tenant, error) {
	r, err := s.q.TenantGet(ctx, id)
	if err != nil {
		return Tenant{}, fmt.Errorf("get tenant: %w", translate(err))
	}
	return tenantOf(r), nil
}

// TenantsList returns a page of tenants in id order, after after ("" from
// the start).
func (s *Store) TenantsList(ctx context.Context, after string, limit int) ([]Tenant, error) {
	rows, err := s.q.TenantsList(ctx, dbsqlc.TenantsListParams{ID: after, Limit: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out := make([]Tenant, len(rows))
	for i, r := range rows {
		out[i] = tenantOf(r)
	}
	return out, nil
}

// TenantSetDisabled disables or enables tenant id, or returns ErrNotFound.
func (s *Store) TenantSetDisabled(ctx context.Context, id string, disabled bool) (Tenant, error) {
	r, err := s.q.TenantSetDisabled(ctx, dbsqlc.TenantSetDisabledParams{ID: id, Disabled: disabled})
	if err != nil {
		return Tenant{}, fmt.Errorf("disable tenant: %w", translate(err))
	}
	return tenantOf(r), nil
}
