package transport

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	standard "github.com/hookflow/hookflow/kit/webhook"
)

// A broker destination keeps each lane (an endpoint's correlation) as a
// subject or stream of its own, and refuses a write that does not follow
// the lane's last stored message: that is what makes a write exactly once
// and in order there, enforced by the broker, whatever attempts race or
// are lost. The lane hands sequence n over only after everything before it
// is finished, so a lane has at most one event in flight; what the broker
// holds last (its tail) is then one of the cases Decide tells apart.

// Tail is the last message a destination holds in a lane.
type Tail struct {
	Sequence   int64
	EventID    string
	EndpointID string
}

// Decision is what to do with a message given its lane's tail.
type Decision int

const (
	// Write: the message follows the tail; write it, expecting that tail.
	Write Decision = iota + 1
	// Written: the tail is this message, written by an earlier attempt
	// whose acknowledgement was lost; nothing is written again.
	Written
	// Refuse: the lane holds another endpoint's messages, or a later
	// sequence than this one; writing would break its order.
	Refuse
)

// Decide says what to do with m, for endpoint endpointID, given its lane's
// tail (nil when the lane is empty), and why when it refuses. A tail after
// Previous but before m is a delivery the ledger ended skipped that reached
// the broker anyway (its acknowledgement was lost before its dead letter):
// it stays, and m follows it. A tail before Previous means the broker lost
// messages hookflow had delivered (a purge, retention): m is written so the
// lane moves on, and the conformance check reports the hole.
func Decide(tail *Tail, m Message, endpointID string) (Decision, string) {
	switch {
	case tail == nil:
		return Write, ""
	case tail.EndpointID != endpointID:
		return Refuse, fmt.Sprintf("the lane holds endpoint %s's messages: give each endpoint a destination of its own", tail.EndpointID)
	case tail.EventID == m.EventID:
		return Written, ""
	case tail.Sequence >= m.Sequence:
		return Refuse, fmt.Sprintf("the lane already holds sequence %d, at or after %d: an event is never written after its successor", tail.Sequence, m.Sequence)
	}
	return Write, ""
}

// Header names of a message written to a broker. The body is the envelope
// as signed; these carry the Standard Webhooks signature and the lane's
// position, so that one consumer library verifies and orders what a
// webhook receiver and a broker consumer get alike.
const (
	HeaderID            = "webhook-id"
	HeaderTimestamp     = "webhook-timestamp"
	HeaderSignature     = "webhook-signature"
	HeaderEndpoint      = "hookflow-endpoint-id"
	HeaderCorrelation   = "hookflow-correlation-id"
	HeaderSequence      = "hookflow-sequence"
	HeaderPrevious      = "hookflow-previous-sequence"
	HeaderSkipped       = "hookflow-skipped-sequences"
	HeaderEventType     = "hookflow-event-type"
	HeaderContentType   = "content-type"
	envelopeContentType = "application/json"
)

// Headers returns the headers of m written for d, signed with d's secrets.
func Headers(d Destination, m Message) (map[string]string, error) {
	ts := m.At.Unix()
	sig, err := standard.Sign(d.Secrets, m.EventID, ts, m.Body)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	h := map[string]string{
		HeaderID:          m.EventID,
		HeaderTimestamp:   strconv.FormatInt(ts, 10),
		HeaderSignature:   sig,
		HeaderEndpoint:    d.EndpointID,
		HeaderCorrelation: m.CorrelationID,
		HeaderSequence:    strconv.FormatInt(m.Sequence, 10),
		HeaderPrevious:    strconv.FormatInt(m.Previous, 10),
		HeaderEventType:   m.Type,
		HeaderContentType: envelopeContentType,
	}
	if len(m.Skipped) > 0 {
		h[HeaderSkipped] = formatSequences(m.Skipped)
	}
	return h, nil
}

// StoredFrom reads a message's lane position and signature back from its
// headers (get looks one up by name, case as written) and its body.
func StoredFrom(get func(name string) string, body []byte) (Stored, error) {
	s := Stored{Lane: get(HeaderCorrelation), EventID: get(HeaderID), EndpointID: get(HeaderEndpoint), Signature: get(HeaderSignature), Body: body}
	var err error
	if s.Sequence, err = strconv.ParseInt(get(HeaderSequence), 10, 64); err != nil {
		return s, fmt.Errorf("read %s: %w", HeaderSequence, err)
	}
	if s.Previous, err = strconv.ParseInt(get(HeaderPrevious), 10, 64); err != nil {
		return s, fmt.Errorf("read %s: %w", HeaderPrevious, err)
	}
	if s.Timestamp, err = strconv.ParseInt(get(HeaderTimestamp), 10, 64); err != nil {
		return s, fmt.Errorf("read %s: %w", HeaderTimestamp, err)
	}
	if v := get(HeaderSkipped); v != "" {
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return s, fmt.Errorf("read %s: %w", HeaderSkipped, err)
			}
			s.Skipped = append(s.Skipped, n)
		}
	}
	return s, nil
}

func formatSequences(seqs []int64) string {
	parts := make([]string, len(seqs))
	for i, n := range seqs {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(parts, ",")
}

// BrokerTimeout bounds a broker check (Checker) and a connection's dial.
const BrokerTimeout = 5 * time.Second
