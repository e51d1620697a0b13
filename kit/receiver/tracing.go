package receiver

import (
	"context"
	"errors"
	"net/http"
)

// Tracer makes the span of each delivery. The receiver depends on no
// tracing library, so that a service importing it does not inherit one in
// its module graph: package otelreceiver
// (github.com/hookflow/hookflow/kit/receiver/otelreceiver, a module of its
// own) makes a Tracer from OpenTelemetry, and another tracer fits behind
// the same two small interfaces.
type Tracer interface {
	// Start begins the span of the delivery r, continuing the sender's
	// trace when r carries one (W3C traceparent, outside the signature).
	// The context it returns is the one the receiver works in and Apply
	// gets, so the application's own spans nest under the delivery's.
	Start(r *http.Request) (context.Context, Span)
}

// Span is the span of one delivery, as the receiver reports to it. Its
// methods are called from the request's goroutine, in the order listed.
// No header, URL or body is handed over: only the method (on the request
// Start gets), the event's keys and what came of it.
type Span interface {
	// Event names the verified event. A delivery refused before its
	// envelope is read (signature, size, method) gets no Event call.
	Event(ev Event)
	// Outcome records what the transaction came to: "applied",
	// "already_processed", "parked", "sequence_conflict" or
	// "previous_passed", "rejected" when Apply returned an error wrapping
	// ErrRejected, or "error" when Apply or the database failed (then err
	// is that error; otherwise err is nil).
	Outcome(outcome string, err error)
	// End ends the span with the HTTP status answered; 0 when nothing was
	// answered (Apply panicked).
	End(status int)
}

// noSpan is the span of a receiver with no Tracer.
type noSpan struct{}

func (noSpan) Event(Event)           {}
func (noSpan) Outcome(string, error) {}
func (noSpan) End(int)               {}

// startSpan begins the delivery's span with the Tracer, if any.
func (rc *Receiver) startSpan(r *http.Request) (context.Context, Span) {
	if rc.tracer == nil {
		return r.Context(), noSpan{}
	}
	return rc.tracer.Start(r)
}

// traceOutcome reports what the transaction came to.
func traceOutcome(span Span, out outcome, err error) {
	switch {
	case errors.Is(err, ErrRejected):
		span.Outcome("rejected", nil)
	case err != nil:
		span.Outcome("error", err)
	default:
		span.Outcome(out.String(), nil)
	}
}

// String names the outcome as the receiver answers it.
func (o outcome) String() string {
	switch o {
	case outcomeApplied:
		return "applied"
	case outcomeAlreadyProcessed:
		return "already_processed"
	case outcomeParked:
		return "parked"
	case outcomeSequenceConflict:
		return "sequence_conflict"
	case outcomePreviousPassed:
		return "previous_passed"
	default:
		return "unknown"
	}
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
