// Package nats is the NATS JetStream transport: each lane (an endpoint's
// correlation) is a subject of its own, <prefix>.<correlation_id>, in a
// stream the user made, and every write is exactly once and in order,
// enforced by the server. A write carries the event as its message id
// (JetStream's duplicate window answers a repeat as already stored) and
// expects the lane's last stored message to be the one the attempt read
// (the per-subject sequence check refuses anything else), so that neither
// a lost acknowledgement nor a stale or concurrent attempt writes an event
// twice or after its successor (transport.Decide). The message is the
// envelope as signed, with the Standard Webhooks signature and the lane's
// position as headers. Nothing it answers holds the credentials.
package nats

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
)

// Type is the endpoint type this transport serves.
const Type = "nats"

// maxDetail bounds what an attempt records of the server's words.
const maxDetail = 1024

// Transport writes to NATS JetStream. It keeps a connection per endpoint
// (and settings, and egress rules), closed by Close.
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

// New returns the NATS transport under the deployment's targets policy.
func New(targets egress.Policy) *Transport {
	return &Transport{targets: targets, pool: newPool()}
}

// Close closes every connection; Send answers Retry after it.
func (t *Transport) Close() error {
	t.pool.close()
	return nil
}

// Validate checks d's settings as Address does.
func (t *Transport) Validate(ctx context.Context, d transport.Destination) error {
	_, err := t.Address(ctx, d)
	return err
}

// Address checks d's Config and Credentials, and the server's address
// against the egress rules as they apply to d's tenant, and returns
// scheme://host:port/<subject prefix>. Its errors are
// *transport.FieldError.
func (t *Transport) Address(_ context.Context, d transport.Destination) (string, error) {
	s, err := parse(d)
	if err != nil {
		return "", err
	}
	if err := t.targets.ForTenant(d.PrivateTargets).CheckAddr(s.host, s.port, s.tls()); err != nil {
		return "", &transport.FieldError{Field: fieldURL, Reason: err.Error()}
	}
	return s.address(), nil
}

// Send writes m to its lane's subject unless the lane already holds it,
// per transport.Decide on the lane's last stored message: one read and
// one conditional publish. A concurrent write between the two (a zombie
// attempt) makes the server refuse the publish; the read and publish are
// then made once more.
func (t *Transport) Send(ctx context.Context, d transport.Destination, m transport.Message) (transport.Result, error) {
	s, err := parse(d)
	if err != nil {
		return transport.Result{}, fmt.Errorf("read nats destination: %w", err)
	}
	subject, err := s.lane(m.CorrelationID)
	if err != nil {
		return transport.Result{}, fmt.Errorf("name the lane: %w", err)
	}
	msg, err := message(d, m, subject)
	if err != nil {
		return transport.Result{}, err
	}
	secrets := redact.NewValues(slices.Collect(maps.Values(d.Credentials)))
	c, err := t.pool.get(keyOf(d))
	if err != nil {
		return failed(err, secrets), nil
	}
	js, st, err := c.open(ctx, t.targets.ForTenant(d.PrivateTargets), s)
	if err != nil {
		return failed(err, secrets), nil
	}
	for try := 1; ; try++ {
		res, err := write(ctx, js, st, d, m, msg)
		if err == nil {
			return res, nil
		}
		if wrongLast(err) && try == 1 {
			continue
		}
		// A publish to the lane, or a read of its last message (whose
		// API subject ends with the lane's).
		err = refusedPermission(js.Conn(), err, subject+`"`)
		f := classify(err)
		if f.drop != keep {
			c.forget(js, f.drop == dropConnection)
		}
		return f.result(err, secrets), nil
	}
}

// write reads the lane's tail and, when Decide says so, publishes msg
// expecting that tail. An error is the server's (or the connection's)
// answer, for classify.
func write(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, d transport.Destination, m transport.Message, msg *nats.Msg) (transport.Result, error) {
	var tail *transport.Tail
	var last uint64
	raw, err := st.GetLastMsgForSubject(ctx, msg.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return transport.Result{}, unanswered(ctx, st, fmt.Errorf("read the lane's last message: %w", err))
	default:
		if tail, err = tailOf(raw); err != nil {
			return permanent(err.Error()), nil
		}
		last = raw.Sequence
	}
	switch decision, why := transport.Decide(tail, m, d.EndpointID); decision {
	case transport.Written:
		return transport.Result{Outcome: transport.Delivered}, nil
	case transport.Refuse:
		return permanent(why), nil
	}
	// A duplicate acknowledgement is as good as a new one: the dedup check
	// runs before the sequence check, so it means an earlier attempt of
	// this very message was stored within the duplicate window.
	_, err = js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(d.EndpointID+":"+m.EventID),
		jetstream.WithExpectStream(st.CachedInfo().Config.Name),
		jetstream.WithExpectLastSequencePerSubject(last))
	if err != nil {
		return transport.Result{}, unanswered(ctx, st, fmt.Errorf("publish: %w", err))
	}
	return transport.Result{Outcome: transport.Delivered}, nil
}

// message is m as written to subject: the envelope as signed, with the
// signature and the lane's position as headers.
func message(d transport.Destination, m transport.Message, subject string) (*nats.Msg, error) {
	h, err := transport.Headers(d, m)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: subject, Data: m.Body, Header: nats.Header{}}
	for k, v := range h {
		// Set as written: NATS headers are case-sensitive, and consumers
		// (and StoredFrom) read these names as transport spells them.
		msg.Header[k] = []string{v}
	}
	return msg, nil
}

// tailOf reads a lane's last message as Decide takes it.
func tailOf(raw *jetstream.RawStreamMsg) (*transport.Tail, error) {
	get := func(name string) string { return raw.Header.Get(name) }
	seq, err := strconv.ParseInt(get(transport.HeaderSequence), 10, 64)
	if err != nil || get(transport.HeaderID) == "" || get(transport.HeaderEndpoint) == "" {
		return nil, fmt.Errorf("the lane's subject %s holds a message hookflow did not write (stream sequence %d): give hookflow a subject prefix no one else publishes under", raw.Subject, raw.Sequence)
	}
	return &transport.Tail{Sequence: seq, EventID: get(transport.HeaderID), EndpointID: get(transport.HeaderEndpoint)}, nil
}

func permanent(why string) transport.Result {
	return transport.Result{Outcome: transport.Permanent, Detail: why, Summary: why}
}

// errNotCaptured is a stream that exists but did not take the lane's
// subject: its subjects changed, or another stream took them.
var errNotCaptured = errors.New("the stream does not capture the lane's subject")

// unanswered tells apart, when nothing answered for the stream (no
// responders), a stream that is missing or no longer captures the lane
// (the user may fix that: retry) from JetStream being down (an outage):
// it asks for the stream's info.
func unanswered(ctx context.Context, st jetstream.Stream, err error) error {
	if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
		return err
	}
	_, ierr := st.Info(ctx)
	switch {
	case ierr == nil:
		return fmt.Errorf("%w: %w", errNotCaptured, err)
	case errors.Is(ierr, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w: %w", ierr, err)
	}
	return err
}

// refusedPermission returns the server's permissions violation, in place
// of err (the timeout it ended in), when it names a subject of the request
// (a fragment of it, quoted as the server quotes it) or the replies'
// inbox: the server answers such a request with an error on the
// connection, not on the request, which then times out. The connection is
// dropped after (classify), so that a violation it recorded is never taken
// for a later one.
func refusedPermission(nc *nats.Conn, err error, fragments ...string) error {
	last := nc.LastError()
	if last == nil || !errors.Is(last, nats.ErrPermissionViolation) || !classify(err).outage {
		return err
	}
	text := last.Error()
	for _, f := range append(fragments, `"_INBOX.`) {
		if strings.Contains(text, f) {
			return fmt.Errorf("%w (%w)", last, err)
		}
	}
	return err
}

// wrongLast says the server refused a publish because the lane's last
// message is no longer the one read: a concurrent attempt wrote between.
func wrongLast(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Error codes nats.go has no name for.
const (
	errCodeStreamMismatch jetstream.ErrorCode = 10060 // the subject is another stream's
)

// drop is what a failed attempt leaves of its connection.
type drop int

const (
	keep drop = iota
	dropStream
	dropConnection
)

// failure is how an error counts (transport's outcome mapping).
type failure struct {
	outcome transport.Outcome
	outage  bool
	drop    drop
	summary string
}

// classify maps an error to its outcome: refused credentials,
// permissions and sizes are permanent; a missing stream is for the user
// to fix within the recovery window (retry, not an outage); a connection
// error, a timeout or JetStream unavailable is an outage.
func classify(err error) failure {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		return failure{outcome: transport.Permanent, summary: "the NATS server refused the credentials"}
	case errors.Is(err, nats.ErrPermissionViolation):
		return failure{outcome: transport.Permanent, drop: dropConnection, summary: "the NATS server refused a permission hookflow needs"}
	case errors.Is(err, nats.ErrMaxPayload):
		return failure{outcome: transport.Permanent, summary: "the message is larger than the NATS server's max_payload"}
	case errors.Is(err, errPoolClosed):
		return failure{outcome: transport.Retry, summary: "the connection was closed by hookflow"}
	case errors.Is(err, errNotCaptured):
		return failure{outcome: transport.Retry, drop: dropStream, summary: "the stream does not capture the lane's subject"}
	case errors.As(err, &api):
		switch {
		case api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return failure{outcome: transport.Permanent, summary: "the message is larger than the stream's max_msg_size"}
		case api.ErrorCode == jetstream.JSErrCodeStreamNotFound:
			return failure{outcome: transport.Retry, drop: dropStream, summary: "the stream is missing"}
		case api.ErrorCode == errCodeStreamMismatch:
			return failure{outcome: transport.Retry, drop: dropStream, summary: "the lane's subject is captured by another stream"}
		case wrongLast(err):
			return failure{outcome: transport.Retry, summary: "the lane changed twice while this attempt wrote"}
		case api.Code >= 500:
			return failure{outcome: transport.Retry, outage: true, summary: "JetStream is unavailable"}
		}
		return failure{outcome: transport.Retry, summary: "JetStream refused the write"}
	}
	return failure{outcome: transport.Retry, outage: true, drop: dropConnection, summary: "the NATS server did not answer"}
}

// result is the attempt's answer for err: its words and the server's,
// with every form of the credentials taken out and control characters
// escaped.
func (f failure) result(err error, secrets *redact.Values) transport.Result {
	detail := printable.String(secrets.Cut(f.summary+": "+err.Error(), maxDetail))
	return transport.Result{Outcome: f.outcome, Outage: f.outage, Detail: detail, Summary: f.summary}
}

func failed(err error, secrets *redact.Values) transport.Result {
	return classify(err).result(err, secrets)
}
