package autoscaler

import (
	"maps"
	"slices"
	"time"
)

// Kind is what an entry of the history records.
type Kind string

// The kinds of entry. Those up to KindLimited are the autoscaler deciding
// to do nothing, each for its own reason.
const (
	// KindWaiting: the job is not running, or not every subtask reported
	// its load.
	KindWaiting Kind = "waiting"
	// KindRestarted: the job restarted or changed parallelism by another
	// hand; the samples start again.
	KindRestarted Kind = "restarted"
	// KindStabilizing: within the stabilization time after a (re)start.
	KindStabilizing Kind = "stabilizing"
	// KindCollecting: the metrics window is not full yet.
	KindCollecting Kind = "collecting"
	// KindNoChange: every vertex is within its target utilization.
	KindNoChange Kind = "no-change"
	// KindDeferred: a scale-down waits for its delay.
	KindDeferred Kind = "deferred"
	// KindLimited: a rescale is due but max-rescales-per-hour is reached.
	KindLimited Kind = "limited"
	// KindNoSlots: a rescale is due but the cluster lacks the slots.
	KindNoSlots Kind = "no-slots"
	// KindRescale: a rescale was asked for; KindRescaled and KindFailed
	// say how it went.
	KindRescale  Kind = "rescale"
	KindRescaled Kind = "rescaled"
	KindFailed   Kind = "rescale-failed"
)

// repeats: consecutive entries of the kind fold into one.
func (k Kind) repeats() bool {
	switch k {
	case KindWaiting, KindStabilizing, KindCollecting, KindNoChange, KindDeferred, KindLimited, KindNoSlots:
		return true
	}
	return false
}

// Entry is one decision, or a run of the same non-decision.
type Entry struct {
	// Time is the decision's; Last and Repeats, for a run of the same
	// non-decision, when it was last made and how often after Time.
	Time    time.Time
	Last    time.Time
	Repeats int
	Kind    Kind
	Reason  string
	// Evaluations are the per-vertex figures the decision was made from
	// (the newest of a run's).
	Evaluations []Evaluation
	// Parallelism is the new parallelism of the vertices a rescale
	// changes.
	Parallelism map[string]int32
}

func (e Entry) clone() Entry {
	e.Evaluations = slices.Clone(e.Evaluations)
	e.Parallelism = maps.Clone(e.Parallelism)
	return e
}

// Evaluation is one unit's figures over the metrics window.
type Evaluation struct {
	// Vertex is the unit's head vertex.
	Vertex      string
	Parallelism int32
	// BusyMsPerSecond is the mean of its subtasks over the window; the
	// record rates are sums.
	BusyMsPerSecond     float64
	RecordsInPerSecond  float64
	RecordsOutPerSecond float64
	// TrueProcessingRate is the records per second the unit would handle
	// were it busy all the time, at its parallelism; 0 when unknown (it
	// handled no records).
	TrueProcessingRate float64
	// TargetRate is the input rate it must keep up with; CatchUpRate the
	// extra to catch up the sources' backlog (and the input of a
	// rescale's pause) within catch-up-duration.
	TargetRate  float64
	CatchUpRate float64
	// PendingRecords is a source's backlog at the window's end, -1 when
	// unknown or not a source.
	PendingRecords int64
	// Utilization is TargetRate over TrueProcessingRate: the share of
	// its capacity the input needs.
	Utilization float64
	// Within: Utilization is within the target's boundary.
	Within bool
	// Recommended is the parallelism the figures call for; Chosen the one
	// decided (Recommended, unless a scale-down is deferred).
	Recommended int32
	Chosen      int32
	Reason      string
}
