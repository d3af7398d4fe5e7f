// Package rpcpolicy holds what the answer to a control-plane call means
// to its caller — done, the callee is gone, the callee does not have what
// the call names, refused for good, or try again after a pause — so that
// the daemons and the control-plane simulator (internal/sim) act on an
// answer alike.
package rpcpolicy

import (
	"time"

	"google.golang.org/grpc/codes"
)

// Verdict is what an answer means to the caller.
type Verdict int

const (
	// Done: the callee took the call.
	Done Verdict = iota
	// Unreachable: the connection failed; the callee is gone, whatever
	// its heartbeats still say.
	Unreachable
	// NotThere: the callee does not have what the call names.
	NotThere
	// Refused: a definite refusal; trying again changes nothing.
	Refused
	// Retry: no answer (a timeout), or a callee not ready: try again
	// after the next pause of a Backoff.
	Retry
)

func (v Verdict) String() string {
	return [...]string{"done", "unreachable", "not-there", "refused", "retry"}[v]
}

// Cancel is what the answer to a CancelTask means. Done: its CANCELED
// report follows. NotThere: the TaskManager does not run the attempt, and
// its table of attempts refuses a deploy of it that comes later, so it is
// cancelled. Unreachable: the TaskManager is gone, and the attempt with
// it. Anything else — a subtask slower to stop than the call's timeout,
// no answer — leaves the attempt possibly running: taking that for done
// would let its replacement run beside it, so the cancel is tried again.
func Cancel(code codes.Code) Verdict {
	switch code {
	case codes.OK:
		return Done
	case codes.Unavailable:
		return Unreachable
	case codes.NotFound:
		return NotThere
	}
	return Retry
}

// Report is what the answer to a subtask state report means. A report the
// JobManager refuses — an attempt or job it does not have, a malformed
// report, a sender it does not accept — is refused for good; any other
// failure is tried again, so that a lost RUNNING or FINISHED does not
// leave the job waiting.
func Report(code codes.Code) Verdict {
	switch code {
	case codes.OK:
		return Done
	case codes.NotFound, codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated:
		return Refused
	}
	return Retry
}

// Backoff is the pause before each next try: First, doubling up to Max.
type Backoff struct {
	First, Max time.Duration
	next       time.Duration
}

// Next is the pause before the next try.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.First
	}
	d := b.next
	b.next = min(2*b.next, b.Max)
	return d
}

// Retries is the backoff of cancels and state reports.
func Retries() Backoff { return Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second} }
