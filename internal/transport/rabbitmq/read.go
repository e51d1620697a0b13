package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookflow/hookflow/internal/transport"
)

// Read drains the destination's audit queue (config audit_queue: a
// durable queue the operator bound to the exchange for "#"), handing each
// message to each in the queue's order, which is publish order per lane.
// A message is acknowledged (removed) only once each returns nil; when
// each or the broker fails, the rest stay in the queue, the unhandled one
// included. Messages other writers put there (another endpoint, or not
// hookflow at all) are handed over too, with the endpoint id they carry
// (none for the latter), their routing key as the lane and their
// message_id as the event id, for the conformance check to report as
// foreign: AMQP cannot refuse them at publish time as a broker with a
// per-lane write check does.
func (t *Transport) Read(ctx context.Context, d transport.Destination, each func(transport.Stored) error) error {
	tg, err := parse(d, t.targets)
	if err != nil {
		return fmt.Errorf("read rabbitmq destination: %w", err)
	}
	if tg.AuditQueue == "" {
		return &transport.FieldError{Field: "config.audit_queue", Reason: "is required to read a rabbitmq destination: a queue bound to the exchange for every routing key"}
	}
	secrets := credentialScrubber(d)
	c, err := dial(ctx, t.targets.ForTenant(d.PrivateTargets), tg)
	if err != nil {
		return errors.New("dial rabbitmq: " + text(err.Error(), secrets))
	}
	// Closing the connection hands back whatever was fetched and not
	// acknowledged.
	defer closeAll([]*amqp.Connection{c})
	defer unboundedCalls(ctx, c)()
	ch, err := c.Channel()
	if err != nil {
		return errors.New("open channel: " + text(err.Error(), secrets))
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, ok, err := ch.Get(tg.AuditQueue, false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return errors.New("get from audit queue: " + text(err.Error(), secrets))
		}
		if !ok {
			return nil
		}
		s, err := stored(m)
		if err != nil && s.EndpointID == d.EndpointID {
			// The endpoint's own message, unreadable: the check cannot
			// judge its lane.
			return fmt.Errorf("read message %q of queue %s: %w", m.MessageId, tg.AuditQueue, err)
		}
		if err := each(s); err != nil {
			return err
		}
		if err := m.Ack(false); err != nil {
			return errors.New("acknowledge: " + text(err.Error(), secrets))
		}
	}
}

// stored reads a delivery back as transport.Stored.
func stored(m amqp.Delivery) (transport.Stored, error) {
	get := func(name string) string {
		switch v := m.Headers[name].(type) {
		case string:
			return v
		case int64:
			return strconv.FormatInt(v, 10)
		case int32:
			return strconv.FormatInt(int64(v), 10)
		case int16:
			return strconv.FormatInt(int64(v), 10)
		case int8:
			return strconv.FormatInt(int64(v), 10)
		case nil:
			return ""
		default:
			return fmt.Sprint(v)
		}
	}
	s, err := transport.StoredFrom(get, m.Body)
	if s.Lane == "" {
		s.Lane = m.RoutingKey
	}
	if s.EventID == "" {
		s.EventID = m.MessageId
	}
	return s, err
}

// WithAuditQueue returns d set to read queue (the conformance command's
// --queue) instead of the audit_queue its config holds.
func WithAuditQueue(d transport.Destination, queue string) (transport.Destination, error) {
	var c Config
	if err := decodeStrict(d.Config, &c, "config", configFields...); err != nil {
		return d, err
	}
	if err := checkName(queue); err != nil {
		return d, &transport.FieldError{Field: "queue", Reason: err.Error()}
	}
	c.AuditQueue = queue
	raw, err := json.Marshal(c)
	if err != nil {
		return d, fmt.Errorf("encode rabbitmq config: %w", err)
	}
	d.Config = raw
	return d, nil
}
