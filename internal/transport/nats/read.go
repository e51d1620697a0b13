package nats

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
)

// Read calls each with every message the stream holds on d's lanes (one
// token under the prefix), in the stream's order, which is each lane's
// order: an ordered consumer from the first message to the last there was
// when Read began. Messages another endpoint or publisher wrote there are
// read too (with their own endpoint id, or none), for the conformance
// check to report.
func (t *Transport) Read(ctx context.Context, d transport.Destination, each func(transport.Stored) error) error {
	s, err := parse(d)
	if err != nil {
		return fmt.Errorf("read nats destination: %w", err)
	}
	secrets := redact.NewValues(slices.Collect(maps.Values(d.Credentials)))
	c, err := t.pool.get(keyOf(d))
	if err != nil {
		return errors.New(secrets.Replace(err.Error()))
	}
	_, st, err := c.open(ctx, t.targets.ForTenant(d.PrivateTargets), s)
	if err != nil {
		return errors.New(secrets.Replace(err.Error()))
	}
	// each's own error is returned as it is; the driver's as text only,
	// since they may repeat the server's address and words.
	var stopped error
	err = read(ctx, st, s.lanes(), func(m transport.Stored) error {
		stopped = each(m)
		return stopped
	})
	switch {
	case stopped != nil:
		return stopped
	case err != nil:
		return errors.New(secrets.Replace(err.Error()))
	}
	return nil
}

func read(ctx context.Context, st jetstream.Stream, filter string, each func(transport.Stored) error) error {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return fmt.Errorf("read stream info: %w", err)
	}
	var held uint64
	for _, n := range info.State.Subjects {
		held += n
	}
	if held == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("create ordered consumer: %w", err)
	}
	// An iterator, so that messages come in batches rather than one
	// round trip each.
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("read messages: %w", err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("read next message: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("read message metadata: %w", err)
		}
		stored, err := transport.StoredFrom(func(name string) string { return msg.Headers().Get(name) }, msg.Data())
		if err != nil {
			// Another publisher's message: passed on with what it has, for
			// the check to report as foreign.
			stored = transport.Stored{Lane: strings.TrimPrefix(msg.Subject(), filter[:len(filter)-1]), Body: msg.Data()}
		}
		if err := each(stored); err != nil {
			return err
		}
		// The messages there were when Read began, and no later ones: a
		// reader racing live deliveries would never end otherwise.
		if meta.Sequence.Stream >= info.State.LastSeq || meta.NumPending == 0 {
			return nil
		}
	}
}

// Check proves d works before it is stored: the server answers with
// these credentials, exactly one stream captures the lanes, it keeps each
// lane's last message (limits retention), and the lanes' last messages
// can be read. It creates and changes nothing. Its errors are
// *transport.FieldError naming the field to fix, and hold no credential.
func (t *Transport) Check(ctx context.Context, d transport.Destination) error {
	if _, err := t.Address(ctx, d); err != nil {
		return err
	}
	s, _ := parse(d)
	secrets := redact.NewValues(slices.Collect(maps.Values(d.Credentials)))
	var nc *nats.Conn
	fieldErr := func(field, reason string, err error) error {
		if nc != nil && err != nil {
			// The connection is Check's own: any permission the server
			// refused on it was refused to one of its requests.
			if refused := refusedPermission(nc, err, `"`); errors.Is(refused, nats.ErrPermissionViolation) {
				field, reason, err = fieldCreds, "they lack a permission hookflow needs", refused
			}
		}
		if err != nil {
			reason += ": " + err.Error()
		}
		return &transport.FieldError{Field: field, Reason: secrets.Cut(reason, maxDetail)}
	}
	ctx, cancel := context.WithTimeout(ctx, transport.BrokerTimeout)
	defer cancel()
	nc, err := dial(ctx, t.targets.ForTenant(d.PrivateTargets), s)
	if err != nil {
		if classify(err).outcome == transport.Permanent {
			return fieldErr(fieldCreds, "the NATS server refused them", nil)
		}
		return fieldErr(fieldURL, "the NATS server cannot be reached", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fieldErr(fieldURL, "JetStream", err)
	}
	all := s.prefix + ".>"
	names := js.StreamNames(ctx, jetstream.WithStreamListSubject(all))
	var found []string
	for n := range names.Name() {
		found = append(found, n)
	}
	if err := names.Err(); err != nil {
		return fieldErr(fieldURL, "list the JetStream streams", err)
	}
	switch {
	case len(found) == 0:
		return fieldErr(fieldSubject, fmt.Sprintf("no JetStream stream captures %s: create one (limits retention, file storage) whose subjects include %s", all, all), nil)
	case len(found) > 1:
		return fieldErr(fieldSubject, fmt.Sprintf("the streams %s each capture part of %s: one stream must capture all of it", strings.Join(found, ", "), all), nil)
	case s.stream != "" && found[0] != s.stream:
		return fieldErr(fieldStream, fmt.Sprintf("%s is captured by stream %s, not %s", all, found[0], s.stream), nil)
	}
	st, err := js.Stream(ctx, found[0])
	if err != nil {
		return fieldErr(fieldSubject, "read stream "+found[0], err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Retention != jetstream.LimitsPolicy {
		return fieldErr(fieldSubject, fmt.Sprintf("stream %s has %s retention, which deletes a lane's last message: hookflow needs limits retention to write each event once", cfg.Name, cfg.Retention), nil)
	}
	if !slices.ContainsFunc(cfg.Subjects, func(subj string) bool { return covers(subj, s.lanes()) }) {
		return fieldErr(fieldSubject, fmt.Sprintf("stream %s captures part of %s only: its subjects must include %s", cfg.Name, all, s.lanes()), nil)
	}
	// Reading a lane's last message (most likely an empty one) proves
	// the read permission, and writes nothing.
	if _, err := st.GetLastMsgForSubject(ctx, s.prefix+"._hookflow_check"); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fieldErr(fieldSubject, "read a lane's last message (the permission to get messages of stream "+cfg.Name+")", err)
	}
	return nil
}
