package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// TestEventType is the type of the event POST /v1/endpoints/{id}/test
// sends: one of hookflow's reserved types, so no producer can send one and
// a receiver can tell a test from real traffic.
const TestEventType = "hookflow.test"

// TestCorrelation is the correlation of the test events of endpoint
// endpointID: "hookflow:test:<endpoint id>". Each endpoint's tests are a
// correlation of their own, so a test never joins or holds back the
// tenant's correlations (a producer may not send a correlation starting
// "hookflow:"), and a test stuck at one receiver holds back no other's.
func TestCorrelation(endpointID string) string {
	return intake.ReservedCorrelationPrefix + "test:" + endpointID
}

// TestEventID is the idempotency key of the seq-th test event of endpoint
// endpointID: "hookflow-test-<endpoint id>-<seq>", a form no producer may
// send (intake.ReservedIDPrefix), and its own key like any event's.
func TestEventID(endpointID string, seq int64) string {
	return intake.ReservedIDPrefix + "test-" + endpointID + "-" + strconv.FormatInt(seq, 10)
}

// TestEventInsert stores a test event (TestEventType, data as given) routed
// to endpointID alone, at the next sequence of its TestCorrelation, taken
// in the same transaction as the insert (TestSequenceNext locks the
// correlation's row), so concurrent tests of one endpoint get contiguous
// sequences. The event is queued, as a posted one is before its workflow
// starts. The caller has checked the endpoint (it exists, is enabled);
// ErrNotFound when the store is limited to other endpoints.
func (s *Store) TestEventInsert(ctx context.Context, endpointID string, data []byte) (Event, error) {
	if !s.reaches(endpointID) {
		return Event{}, fmt.Errorf("insert test event: %w", ErrNotFound)
	}
	raw, err := intake.Canonical(data)
	if err != nil {
		return Event{}, fmt.Errorf("insert test event: encode data: %w", err)
	}
	var stored Event
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		corr := TestCorrelation(endpointID)
		seq, err := q.TestSequenceNext(ctx, dbsqlc.TestSequenceNextParams{TenantID: s.tenant, CorrelationID: corr})
		if err != nil {
			return fmt.Errorf("next sequence: %w", err)
		}
		ev := intake.Event{ID: TestEventID(endpointID, seq), CorrelationID: corr, Sequence: seq, EndpointID: endpointID, Type: TestEventType, Data: raw}
		ev.PayloadHash = intake.PayloadHash(ev.CorrelationID, ev.Sequence, ev.EndpointID, ev.Type, ev.Data)
		var inserted bool
		stored, inserted, err = s.insertRouted(ctx, q, ev, []string{endpointID}, nil)
		if err == nil && !inserted {
			// Its id is taken: only a row stored by hand can hold a
			// reserved id under another sequence.
			return fmt.Errorf("event %s is taken", ev.ID)
		}
		return err
	})
	if err != nil {
		return Event{}, fmt.Errorf("insert test event for %s: %w", endpointID, err)
	}
	return stored, nil
}
