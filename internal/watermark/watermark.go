// Package watermark holds the event-time watermark logic of a subtask as two
// pure state machines in the style of etcd's raft: they start no goroutines,
// do no I/O and never read the wall clock. The runtime feeds them events,
// passing processing time in as time.Time arguments, and forwards what they
// return. Every rule is therefore testable step by step.
//
// # Model
//
// A watermark W says "no record with a timestamp ≤ W follows". Timestamps
// and watermarks are int64 milliseconds; Min means "no watermark yet" and Max
// means "end of input". Next to its watermark, every stream has a status:
// active, or idle. An idle stream promises nothing about its watermark but
// asks its consumers not to wait for it, so one quiet partition does not
// stall event time for the whole job.
//
// Generator is the source side (Flink's BoundedOutOfOrdernessWatermarks with
// withIdleness, generated per split as Flink's SourceOperator does): it
// turns record timestamps of the splits a source subtask reads into one
// watermark and status, emitted at most once per interval.
//
// Valve is the consumer side (Flink's StatusWatermarkValve): it merges the
// watermarks and statuses of a subtask's input channels into the one
// watermark the subtask's operators see and the one status it forwards.
//
// Both only ever emit increasing watermarks: a stream that falls behind (a
// resuming idle split or channel) holds the output where it is until it
// catches up, instead of moving it backwards, which downstream operators
// could not undo (windows already fired).
package watermark

import (
	"math"
	"strconv"
	"strings"
)

const (
	// Min is the watermark before any is known.
	Min int64 = math.MinInt64
	// Max is the watermark at the end of input: every timer may fire.
	Max int64 = math.MaxInt64
)

// Output is what a state machine asks the runtime to forward after an event.
type Output struct {
	// Watermark is the output watermark after the event.
	Watermark int64
	// Advanced reports that Watermark increased: forward it downstream.
	Advanced bool
	// StatusChanged reports that the output idleness changed: forward the
	// status downstream.
	StatusChanged bool
	// Idle is the output status after the event.
	Idle bool
}

// String renders the output for logs and scenario files, e.g.
// "wm=5 advanced active" or "wm=min idle (status changed)".
func (o Output) String() string {
	var b strings.Builder
	b.WriteString("wm=")
	b.WriteString(FormatTimestamp(o.Watermark))
	if o.Advanced {
		b.WriteString(" advanced")
	}
	if o.Idle {
		b.WriteString(" idle")
	} else {
		b.WriteString(" active")
	}
	if o.StatusChanged {
		b.WriteString(" (status changed)")
	}
	return b.String()
}

// FormatTimestamp renders a timestamp, spelling the two sentinels as "min"
// and "max" so they are not mistaken for real (absurd) times.
func FormatTimestamp(ts int64) string {
	switch ts {
	case Min:
		return "min"
	case Max:
		return "max"
	}
	return strconv.FormatInt(ts, 10)
}
