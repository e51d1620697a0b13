// Package rabbitmq is the transport of a RabbitMQ destination (AMQP 0-9-1):
// each event's envelope is published, persistent, to the user's exchange
// with the lane's correlation as the routing key, mandatory, on a
// confirm-mode channel, with the event id as message_id and the signed
// headers a webhook receiver gets.
//
// What it promises, exactly: in order per lane into each queue bound for
// the lane's routing key, at least once. The lane hands event n+1 over
// only after n is confirmed, and a queue keeps publish order, so first
// copies are in order. An attempt whose confirm is lost (a timeout, a
// broker killed) is published again by the next attempt with the same
// message_id and webhook-id: a consumer deduplicates on it (the receiver
// kit does). AMQP 0-9-1 has no server-side check that could refuse that
// repeat, so unlike the nats and redis transports this one does not use
// transport.Decide. The broker confirms a persistent message to a durable
// queue once it is written to disk.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
)

// Type is the endpoint type this transport serves.
const Type = "rabbitmq"

// maxDetail bounds the broker's words kept in a Result's Detail.
const maxDetail = 1024

// Transport publishes to RabbitMQ destinations through a pool of
// connections, one per endpoint's settings and egress policy.
type Transport struct {
	targets egress.Policy
	pool    *pool
}

var (
	_ transport.Transport  = (*Transport)(nil)
	_ transport.Configurer = (*Transport)(nil)
	_ transport.Checker    = (*Transport)(nil)
	_ transport.Reader     = (*Transport)(nil)
)

// New returns the rabbitmq transport under the deployment's targets
// policy.
func New(targets egress.Policy) *Transport {
	return &Transport{targets: targets, pool: newPool(targets)}
}

// Close closes the pooled connections (worker stop); Send fails after.
func (t *Transport) Close() error { return t.pool.close() }

// AtLeastOnce says a lane may hold a repeat: AMQP 0-9-1 cannot refuse
// one, so a confirm lost to a timeout or a restart publishes the message
// again (with the same message_id), and a consumer deduplicates
// (transport.AtLeastOnce).
func (t *Transport) AtLeastOnce() bool { return true }

// Validate checks d's config and credentials as Address does.
func (t *Transport) Validate(ctx context.Context, d transport.Destination) error {
	_, err := t.Address(ctx, d)
	return err
}

// Address checks d's config ({"url","exchange","audit_queue"}) and
// credentials ({"username","password"}), the egress rules on the broker's
// address included, without reaching it, and returns the destination's
// canonical address: amqps://host:port/<vhost>/<exchange>, each part
// percent-escaped (the default vhost is %2F). Its error is a
// *transport.FieldError.
func (t *Transport) Address(_ context.Context, d transport.Destination) (string, error) {
	tg, err := parse(d, t.targets)
	if err != nil {
		return "", err
	}
	return tg.canonical(), nil
}

// Check reaches the broker with d's credentials and proves the exchange
// (and the audit queue, when set) exists. Its error is a
// *transport.FieldError naming what is wrong, with no credential in it.
func (t *Transport) Check(ctx context.Context, d transport.Destination) error {
	tg, err := parse(d, t.targets)
	if err != nil {
		return err
	}
	secrets := credentialScrubber(d)
	c, err := dial(ctx, t.targets.ForTenant(d.PrivateTargets), tg)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.NotAllowed) {
			return &transport.FieldError{Field: "credentials", Reason: "the broker refused the login: " + text(ae.Reason, secrets)}
		}
		return &transport.FieldError{Field: "config.url", Reason: "cannot reach the broker: " + text(err.Error(), secrets)}
	}
	defer closeAll([]*amqp.Connection{c})
	defer unboundedCalls(ctx, c)()
	passive := func(field, what string, declare func(*amqp.Channel) error) error {
		ch, err := c.Channel()
		if ctx.Err() != nil {
			return &transport.FieldError{Field: "config.url", Reason: "the broker did not answer in time"}
		}
		if err != nil {
			return &transport.FieldError{Field: "config.url", Reason: "cannot open a channel: " + text(err.Error(), secrets)}
		}
		// Each check has a channel of its own, as a 404 closes the
		// channel it comes on; closing the connection closes them all.
		if err := declare(ch); err != nil {
			if ctx.Err() != nil {
				return &transport.FieldError{Field: "config.url", Reason: "the broker did not answer in time"}
			}
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound {
				return &transport.FieldError{Field: field, Reason: fmt.Sprintf("%s does not exist in vhost %q (hookflow does not create it)", what, tg.vhost)}
			}
			return &transport.FieldError{Field: field, Reason: "cannot check " + what + ": " + text(err.Error(), secrets)}
		}
		return nil
	}
	err = passive("config.exchange", fmt.Sprintf("exchange %q", tg.Exchange), func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(tg.Exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	})
	if err != nil || tg.AuditQueue == "" {
		return err
	}
	return passive("config.audit_queue", fmt.Sprintf("queue %q", tg.AuditQueue), func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(tg.AuditQueue, true, false, false, false, nil)
		return err
	})
}

// Send publishes m to d's exchange and waits for the broker's confirm:
// confirmed and routed → Delivered; returned unroutable (no queue bound
// for the lane) or the exchange missing → Retry, which the user may fix
// within the recovery window; refused access, a message the broker will
// not take, or a correlation too long to be a routing key → Permanent;
// anything else (unreachable, a nack, a timeout, a lost connection) →
// Retry as an outage. Its error, like Detail, holds no credential.
func (t *Transport) Send(ctx context.Context, d transport.Destination, m transport.Message) (transport.Result, error) {
	res, err := t.send(ctx, d, m)
	// The broker's words are scrubbed where they are quoted; what is
	// said of the config (an exchange, a routing key) once more here, in
	// case a credential matches it.
	secrets := credentialScrubber(d)
	res.Detail, res.Summary = secrets.Replace(res.Detail), secrets.Replace(res.Summary)
	return res, err
}

func (t *Transport) send(ctx context.Context, d transport.Destination, m transport.Message) (transport.Result, error) {
	tg, err := parse(d, t.targets)
	if err != nil {
		return transport.Result{}, fmt.Errorf("read rabbitmq destination: %w", err)
	}
	if len(m.CorrelationID) > maxName {
		return permanent(fmt.Sprintf("the correlation id is %d bytes, longer than the %d an AMQP routing key holds", len(m.CorrelationID), maxName)), nil
	}
	pub, err := publishing(d, m)
	if err != nil {
		return transport.Result{}, err
	}
	secrets := credentialScrubber(d)
	c, ch, err := t.pool.take(ctx, d, tg)
	var blocked *blockedError
	if errors.As(err, &blocked) {
		// Said at once rather than at the end of the attempt's time.
		msg := text(blocked.Error(), secrets)
		return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg, Outage: true}, nil
	}
	if err != nil {
		return failure(err, "reach the broker", secrets), nil
	}
	// The client's publish ignores ctx once it writes, and a write blocks
	// while the broker stops reading the connection (a resource alarm):
	// it runs aside, and an attempt whose time runs out first closes the
	// connection, which ends the write.
	type publish struct {
		dc  *amqp.DeferredConfirmation
		err error
	}
	published := make(chan publish, 1)
	go func() {
		dc, err := ch.ch.PublishWithDeferredConfirmWithContext(ctx, tg.Exchange, m.CorrelationID, true, false, pub)
		published <- publish{dc, err}
	}()
	var dc *amqp.DeferredConfirmation
	select {
	case p := <-published:
		if p.err != nil {
			discard(ch)
			return failure(p.err, "publish", secrets), nil
		}
		dc = p.dc
	case <-ctx.Done():
		t.pool.drop(c)
		msg := "the broker did not take the message within the attempt's time (it stopped reading the connection)"
		return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg, Outage: true}, nil
	}
	select {
	case <-dc.Done():
	case <-ctx.Done():
		// A confirm that comes later cannot be told from the next
		// attempt's: the channel goes with this attempt.
		discard(ch)
		msg := "no confirm from the broker within the attempt's time: the message may be written, and the next attempt publishes it again with the same message_id"
		return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg, Outage: true}, nil
	}
	if !dc.Acked() {
		// The client resolves pending confirms as not acked when the
		// channel closes, after it has handed the close's reason over.
		select {
		case e := <-ch.closes:
			if e != nil {
				return failure(e, "publish", secrets), nil
			}
		default:
		}
		discard(ch)
		msg := "the broker nacked the message (it could not write it)"
		return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg, Outage: true}, nil
	}
	// A mandatory message no queue took comes back before its confirm.
	select {
	case r := <-ch.returns:
		t.pool.give(c, ch)
		summary := fmt.Sprintf("unroutable: exchange %q has no queue bound for routing key %q", tg.Exchange, m.CorrelationID)
		detail := summary + fmt.Sprintf(" (%d %s)", r.ReplyCode, text(r.ReplyText, secrets))
		return transport.Result{Outcome: transport.Retry, Detail: detail, Summary: summary}, nil
	default:
	}
	t.pool.give(c, ch)
	return transport.Result{Outcome: transport.Delivered}, nil
}

// publishing is m as published for d: the envelope as is, persistent,
// the event id as message_id, and the signed headers (sequence numbers as
// AMQP integers, the rest as strings).
func publishing(d transport.Destination, m transport.Message) (amqp.Publishing, error) {
	h, err := transport.Headers(d, m)
	if err != nil {
		return amqp.Publishing{}, fmt.Errorf("build rabbitmq headers: %w", err)
	}
	headers := amqp.Table{}
	for k, v := range h {
		headers[k] = v
	}
	// The content type is the message's property, not a header.
	delete(headers, transport.HeaderContentType)
	headers[transport.HeaderSequence] = m.Sequence
	headers[transport.HeaderPrevious] = m.Previous
	return amqp.Publishing{
		Headers:       headers,
		ContentType:   h[transport.HeaderContentType],
		DeliveryMode:  amqp.Persistent,
		CorrelationId: m.CorrelationID,
		MessageId:     m.EventID,
		Timestamp:     m.At,
		Type:          m.Type,
		AppId:         "hookflow",
		Body:          m.Body,
	}, nil
}

// failure maps an error of the broker or of the connection to a Result.
// Only the broker's own answers are read by their code: the client
// reports a lost connection as a frame error (501) of its own making,
// which is an outage, not a malformed message.
func failure(err error, doing string, secrets *redact.Values) transport.Result {
	var ae *amqp.Error
	if !errors.As(err, &ae) || !(ae.Server || ae == amqp.ErrCredentials || ae == amqp.ErrVhost) {
		msg := doing + ": " + text(err.Error(), secrets)
		return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg, Outage: true}
	}
	summary := fmt.Sprintf("%s: the broker answered %d", doing, ae.Code)
	detail := summary + " " + text(ae.Reason, secrets)
	switch {
	case ae.Code == amqp.NotAllowed && strings.Contains(ae.Reason, "limit"):
		// A connection or channel limit of the user or the vhost: room
		// may come, as from an overloaded server.
		return transport.Result{Outcome: transport.Retry, Detail: detail, Summary: summary, Outage: true}
	case ae.Code == amqp.AccessRefused, ae.Code == amqp.NotAllowed:
		// Refused credentials, or a user without permission on the
		// vhost or the exchange: no retry will do better. (RabbitMQ drops
		// the socket on a wrong password, and the client reads any drop
		// at that step as one: a broker that dies during a login is
		// taken for a refusal too.)
		return transport.Result{Outcome: transport.Permanent, Detail: detail, Summary: summary}
	case ae.Code == amqp.ContentTooLarge, ae.Code == amqp.PreconditionFailed, ae.Code == amqp.FrameError, ae.Code == amqp.SyntaxError:
		// A message over the broker's max_message_size and the like.
		return transport.Result{Outcome: transport.Permanent, Detail: detail, Summary: summary}
	case ae.Code == amqp.NotFound:
		// The exchange is missing: the user may declare it again within
		// the recovery window. The broker is up.
		summary = doing + ": the exchange does not exist"
		return transport.Result{Outcome: transport.Retry, Detail: detail, Summary: summary}
	}
	return transport.Result{Outcome: transport.Retry, Detail: detail, Summary: summary, Outage: true}
}

func permanent(msg string) transport.Result {
	return transport.Result{Outcome: transport.Permanent, Detail: msg, Summary: msg}
}

// unboundedCalls bounds the client's calls on c, which take no context
// (a broker that stops answering holds them forever), by ctx: when ctx
// ends first, c is closed and they fail. Call the function it returns
// once done with c.
func unboundedCalls(ctx context.Context, c *amqp.Connection) (stop func()) {
	s := context.AfterFunc(ctx, func() { _ = c.CloseDeadline(time.Now()) })
	return func() { s() }
}

// credentialScrubber takes d's credentials out of any text: a driver's
// error may quote a login, and the broker's may quote a user name.
func credentialScrubber(d transport.Destination) *redact.Values {
	values := make([]string, 0, len(d.Credentials))
	for _, v := range d.Credentials {
		values = append(values, v)
	}
	return redact.NewValues(values)
}

// text is a broker's or a driver's words as kept: no credential, no
// control character, bounded.
func text(s string, secrets *redact.Values) string {
	return printable.String(secrets.Cut(strings.TrimSpace(s), maxDetail))
}
