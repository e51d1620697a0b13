// Package signalerr says whether a signal sent to a Temporal workflow surely
// did not arrive, so that what was claimed for it may be undone.
package signalerr

import (
	"errors"

	"go.temporal.io/api/serviceerror"
)

// beforeSend is an error met before the signal was sent (the context was
// done already, or the ledger failed after Temporal answered that no
// workflow runs): nothing reached Temporal.
type beforeSend struct{ err error }

func (e beforeSend) Error() string { return e.err.Error() }
func (e beforeSend) Unwrap() error { return e.err }

// BeforeSend marks err as met before anything was sent: NotSent is true for
// it.
func BeforeSend(err error) error { return beforeSend{err} }

// NotSent reports whether err, from starter.SignalDeadLetter (or a
// SignalWorkflow), says for certain that the signal did not reach Temporal,
// so that an action claimed for it may be undone. Only a refusal that
// depends on the request alone is certain: the SDK retries a call that met
// Unavailable, ResourceExhausted, Aborted or Unknown with the same request
// ID, which the server deduplicates, so a retry of a signal an earlier
// attempt delivered succeeds, and one refused for the request itself
// (InvalidArgument, an unknown or inactive namespace, a permission denied)
// was refused at every attempt. Everything else is false, as "it may have
// arrived": a deadline or cancellation (the server may have taken the
// signal before the client stopped waiting), Unavailable or
// ResourceExhausted (the last attempt's answer says nothing of an earlier
// one's), NotFound (the workflow may have ended after an earlier attempt's
// signal; starter.SignalDeadLetter answers its own NotFound from the ledger) and
// any error it does not know. A false costs a wait, not a wrong answer: the
// claim stands and the heads sweep sends it again (starter.resendLostClaim) if the
// workflow still waits on its dead letter.
func NotSent(err error) bool {
	if err == nil {
		return false
	}
	var (
		notSent       beforeSend
		invalid       *serviceerror.InvalidArgument
		nsNotFound    *serviceerror.NamespaceNotFound
		nsNotActive   *serviceerror.NamespaceNotActive
		nsInvalid     *serviceerror.NamespaceInvalidState
		denied        *serviceerror.PermissionDenied
		unimplemented *serviceerror.Unimplemented
	)
	return errors.As(err, &notSent) || errors.As(err, &invalid) || errors.As(err, &nsNotFound) ||
		errors.As(err, &nsNotActive) || errors.As(err, &nsInvalid) || errors.As(err, &denied) ||
		errors.As(err, &unimplemented)
}
