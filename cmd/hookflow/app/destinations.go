package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/destcheck"
	"github.com/hookflow/hookflow/internal/transport"
)

// ErrNotABroker is CheckDestination's refusal of an endpoint whose
// transport cannot read its destination back (a webhook).
var ErrNotABroker = errors.New("not a broker destination")

// CheckDestination reads the broker destination of endpoint id with the
// endpoint's config and credentials, through the transport the attempts
// use (under the deployment's targets policy, the allowlist granted: an
// operator reads), and compares it with the endpoint's deliveries in the
// ledger (destcheck). store.ErrNotFound when there is no such endpoint.
func CheckDestination(ctx context.Context, cfg config.Config, id string) (destcheck.Report, error) {
	st, err := ConnectStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return destcheck.Report{}, err
	}
	defer st.Pool().Close()
	tenant, err := st.EndpointTenant(ctx, id)
	if err != nil {
		return destcheck.Report{}, err
	}
	ledger := st.Tenant(tenant)
	ep, err := ledger.EndpointGet(ctx, id)
	if err != nil {
		return destcheck.Report{}, err
	}
	transports, err := Transports(cfg)
	if err != nil {
		return destcheck.Report{}, err
	}
	defer transports.Close()
	tr, err := transports.Lookup(ep.Type)
	if err != nil {
		return destcheck.Report{}, err
	}
	rd, ok := tr.(transport.Reader)
	if !ok {
		return destcheck.Report{}, fmt.Errorf("endpoint %s is a %s: %w", id, ep.Type, ErrNotABroker)
	}
	deliveries, err := ledger.EndpointDeliveries(ctx, id)
	if err != nil {
		return destcheck.Report{}, err
	}
	now := time.Now()
	secrets := []string{ep.Secret}
	for _, p := range ep.Previous {
		secrets = append(secrets, p.Secret)
	}
	return destcheck.Check(ctx, rd, ep.Destination(true, now), secrets, destcheck.FromLedger(deliveries), transport.AtLeastOnce(tr))
}
