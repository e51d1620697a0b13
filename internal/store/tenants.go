package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	// PortalOrigins are the origins that may frame its portal page (the
	// page's CSP frame-ancestors); none by default.
	PortalOrigins []string
	Created       time.Time
	Updated       time.Time
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
	// DeliveriesPerSecond bounds the attempts sent to its endpoints, over
	// all of them and every worker.
	DeliveriesPerSecond *float64
	// AllowPrivateTargets says whether HOOKFLOW_PRIVATE_TARGET_ALLOWLIST
	// applies to its endpoints (nil: only the default tenant's).
	AllowPrivateTargets *bool
}

// PrivateTargets reports whether the private-target allowlist applies to
// tenant's endpoints: as its limit says, or, by default, only to the
// default tenant, the operator's own (as DeliveryStartAttempt reads it).
func (l TenantLimits) PrivateTargets(tenant string) bool {
	if l.AllowPrivateTargets != nil {
		return *l.AllowPrivateTargets
	}
	return tenant == DefaultTenant
}

func tenantOf(r dbsqlc.Tenant) Tenant {
	t := Tenant{ID: r.ID, Name: r.Name, Metadata: r.Metadata, Disabled: r.Disabled, Created: r.CreatedAt, Updated: r.UpdatedAt,
		Limits: TenantLimits{EventsPerSecond: r.EventsPerSecond, MaxEndpoints: r.MaxEndpoints,
			DeliveriesPerSecond: r.DeliveriesPerSecond, AllowPrivateTargets: r.AllowPrivateTargets}, PortalOrigins: r.PortalOrigins}
	if r.MaxRecoveryWindowMs != nil {
		d := time.Duration(*r.MaxRecoveryWindowMs) * time.Millisecond
		t.Limits.MaxRecoveryWindow = &d
	}
	return t
}

// TenantPut creates tenant t.ID, or replaces its name, metadata and limits
// (its disabled flag stays), and reports which. A change of its
// deliveries_per_second gives up the slots reserved under the old rate and
// wakes its lanes (TenantRateSlotsReset), in the same transaction.
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
	origins := t.PortalOrigins
	if origins == nil {
		origins = []string{}
	}
	var r dbsqlc.TenantPutRow
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.TenantRateSlotsReset(ctx, dbsqlc.TenantRateSlotsResetParams{ID: t.ID, DeliveriesPerSecond: t.Limits.DeliveriesPerSecond}); err != nil {
			return err
		}
		var err error
		r, err = q.TenantPut(ctx, dbsqlc.TenantPutParams{ID: t.ID, Name: t.Name, Metadata: meta,
			EventsPerSecond: t.Limits.EventsPerSecond, MaxEndpoints: t.Limits.MaxEndpoints, MaxRecoveryWindowMs: window,
			DeliveriesPerSecond: t.Limits.DeliveriesPerSecond, AllowPrivateTargets: t.Limits.AllowPrivateTargets, PortalOrigins: origins})
		return err
	})
	if err != nil {
		return Tenant{}, false, fmt.Errorf("put tenant: %w", translate(err))
	}
	return tenantOf(dbsqlc.Tenant{ID: r.ID, Name: r.Name, Metadata: r.Metadata, Disabled: r.Disabled, EventsPerSecond: r.EventsPerSecond,
		MaxEndpoints: r.MaxEndpoints, MaxRecoveryWindowMs: r.MaxRecoveryWindowMs, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		DeliveriesPerSecond: r.DeliveriesPerSecond, AllowPrivateTargets: r.AllowPrivateTargets, PortalOrigins: r.PortalOrigins}), r.Created, nil
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
// Enabling it asks every lane of its endpoints to wake, in the same
// transaction: the heads its disabling held send now.
func (s *Store) TenantSetDisabled(ctx context.Context, id string, disabled bool) (Tenant, error) {
	var r dbsqlc.Tenant
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		if r, err = q.TenantSetDisabled(ctx, dbsqlc.TenantSetDisabledParams{ID: id, Disabled: disabled}); err != nil || disabled {
			return err
		}
		return q.TenantWakeLanes(ctx, id)
	})
	if err != nil {
		return Tenant{}, fmt.Errorf("disable tenant: %w", translate(err))
	}
	return tenantOf(r), nil
}
