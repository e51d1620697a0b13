package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// errOperationalRefused: the ledger refused an operational event
// (OperationalEventInsert drops it).
var errOperationalRefused = errors.New("operational event refused by the ledger")

// OperationalEventID is the idempotency key of the seq-th operational
// event about endpoint subject: deterministic, so that the event is its
// own key like any event (a receiver's dedup holds across redeliveries),
// and of a form no producer may send (kit/intake refuses ids starting with
// intake.ReservedIDPrefix).
func OperationalEventID(subject string, seq int64) string {
	return intake.ReservedIDPrefix + subject + "-" + strconv.FormatInt(seq, 10)
}

// OperationalEventInsert stores hookflow's own operational event of type eventType
// (one of contract's hookflow.* names) about endpoint subject: correlation ID =
// contract.OperationalCorrelation(subject) ("hookflow:<subject>"), the next contiguous
// sequence of that correlation, routed (as store.Route does) to every
// enabled endpoint subscribed to the type except subject itself, state queued (the API's
// queued-event sweep starts its workflow). tx may be nil (its own transaction); with a tx the
// event commits or rolls back with the caller's change.
//
// "Subscribed" is by a pattern that names hookflow's types (exact,
// "hookflow.*", "hookflow.endpoint.*"): an endpoint subscribed to every
// type (no event_types, or "*") does not get operational events
// (OperationalSubscribers). With no subscriber the event is stored all the
// same, with no deliveries, and is delivered as soon as its workflow
// starts, so the correlation's sequence stays contiguous. data gets
// "endpoint_id": subject when it has no such key; the caller's map is not
// changed. It must hold no secret (custom header values, signing secrets):
// it is stored in the ledger and sent to the subscribers.
//
// Errors: the subject must be an existing endpoint, and the type one of
// hookflow's. A collision never fails the caller: producers cannot send the
// reserved correlation or id (kit/intake refuses both in any case), and the
// sequence is taken past whatever the correlation holds
// (OperationalSequenceNext). Should the ledger refuse the event all the same
// (its id stored by hand under another correlation), the event is dropped
// in a savepoint of its own, its number with it (no gap), and eventID is
// "": the dead letter or breaker transition it reports must commit
// whatever becomes of its notice.
func (s *Store) OperationalEventInsert(ctx context.Context, tx pgx.Tx, subject, eventType string, data map[string]any) (eventID string, err error) {
	if !contract.Operational(eventType) {
		return "", fmt.Errorf("insert operational event: %q is not an operational type", eventType)
	}
	payload := make(map[string]any, len(data)+1)
	for k, v := range data {
		payload[k] = v
	}
	if _, ok := payload["endpoint_id"]; !ok {
		payload["endpoint_id"] = subject
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return "", fmt.Errorf("insert operational event: encode data: %w", err)
	}
	if raw, err = intake.Canonical(raw); err != nil {
		return "", fmt.Errorf("insert operational event: encode data: %w", err)
	}
	correlation := contract.OperationalCorrelation(subject)
	insert := func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		seq, err := q.OperationalSequenceNext(ctx, dbsqlc.OperationalSequenceNextParams{TenantID: s.tenant, EndpointID: subject, CorrelationID: correlation})
		if err != nil {
			return fmt.Errorf("next sequence: %w", err)
		}
		endpoints, err := q.OperationalSubscribers(ctx, dbsqlc.OperationalSubscribersParams{TenantID: s.tenant,
			Column1: eventType, ID: subject, Limit: contract.MaxSubscribersCeiling})
		if err != nil {
			return fmt.Errorf("route: %w", err)
		}
		ev := intake.Event{ID: OperationalEventID(subject, seq), CorrelationID: correlation, Sequence: seq, Type: eventType, Data: raw}
		ev.PayloadHash = intake.PayloadHash(ev.CorrelationID, ev.Sequence, "", ev.Type, ev.Data)
		_, err = q.EventInsertRouted(ctx, dbsqlc.EventInsertRoutedParams{TenantID: s.tenant, ID: ev.ID, CorrelationID: ev.CorrelationID,
			Sequence: ev.Sequence, Type: ev.Type, Data: ev.Data, PayloadHash: ev.PayloadHash, Endpoints: endpoints})
		if errors.Is(err, pgx.ErrNoRows) {
			return errOperationalRefused
		}
		if err != nil {
			return err
		}
		eventID = ev.ID
		return nil
	}
	// The savepoint (a transaction of its own when tx is nil) undoes the
	// number's move when the event is refused.
	var begin interface {
		Begin(ctx context.Context) (pgx.Tx, error)
	} = s.pool
	if tx != nil {
		begin = tx
	}
	err = pgx.BeginFunc(ctx, begin, insert)
	if errors.Is(err, errOperationalRefused) {
		return "", nil
	}
	if err != nil && tx != nil && ctx.Err() == nil {
		// The savepoint is rolled back and the caller's transaction goes
		// on: the change the notice reports (a dead letter, a breaker's
		// transition) is what an operator acts on, and must not wait on a
		// notice the ledger cannot take (its sequence out of range, a row
		// written by hand). The loss is logged and counted instead.
		s.noticeDropped(ctx, subject, eventType, err)
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("insert operational event %s about %s: %w", eventType, subject, err)
	}
	return eventID, nil
}

// noticeDropped reports an operational event the ledger could not store
// (NoticeReport).
func (s *Store) noticeDropped(ctx context.Context, subject, eventType string, err error) {
	var r NoticeReport
	if s.notices != nil {
		r = *s.notices
	}
	logger := r.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.WarnContext(ctx, "operational event dropped", "tenant_id", s.tenant, "endpoint_id", subject, "event_type", eventType, "error", err)
	if r.Dropped != nil {
		r.Dropped(eventType)
	}
}

// EndpointsOperationalCount counts the endpoints other than except, not
// deleted, subscribed to any of hookflow's operational types: the
// subscribers an operational event may have, which the API caps as it caps
// a producer's event's.
func (s *Store) EndpointsOperationalCount(ctx context.Context, except string) (int, error) {
	n, err := s.q.EndpointsOperationalCount(ctx, dbsqlc.EndpointsOperationalCountParams{TenantID: s.tenant, ID: except})
	if err != nil {
		return 0, fmt.Errorf("count operational subscribers: %w", err)
	}
	return int(n), nil
}
