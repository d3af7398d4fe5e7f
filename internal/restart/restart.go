// Package restart decides whether and when a failed job restarts: Flink's
// restart strategies (none, fixed-delay, exponential-delay) as pure values
// fed with the time of each failure.
package restart

import (
	"fmt"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Strategy decides on restarts. Failure is called once per job failure with
// the time it happened; it returns the delay before the restart, or ok=false
// when the job must fail for good.
type Strategy interface {
	Failure(now time.Time) (delay time.Duration, ok bool)
	// Describe says what the strategy allows, for failure messages.
	Describe() string
	// Budget is what the strategy has used up, for a new leader to carry
	// on with (New's second argument) rather than start over.
	Budget() Budget
}

// Budget is the part of a strategy that changes with failures. It is
// stored with the job, so that a JobManager failover does not grant a
// failing job a fresh set of attempts.
type Budget struct {
	Used        int           `json:"used,omitempty"`
	Current     time.Duration `json:"current_ns,omitempty"`
	LastFailure time.Time     `json:"last_failure,omitzero"`
}

// New returns the strategy the job spec asks for, with budget already
// used (the zero Budget for a new job); now is when it takes the budget
// over, on the clock its Failure calls will use.
func New(spec *weirv1.RestartStrategy, used Budget, now time.Time) Strategy {
	switch spec.GetKind() {
	case weirv1.RestartStrategy_KIND_FIXED_DELAY:
		return &fixedDelay{attempts: int(spec.GetAttempts()), delay: spec.GetDelay().AsDuration(), used: used.Used}
	case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
		return &exponentialDelay{
			attempts:    int(spec.GetAttempts()),
			initial:     spec.GetInitialBackoff().AsDuration(),
			max:         spec.GetMaxBackoff().AsDuration(),
			multiplier:  spec.GetMultiplier(),
			reset:       spec.GetResetBackoffThreshold().AsDuration(),
			used:        used.Used,
			current:     used.Current,
			lastFailure: rebase(used.LastFailure, now),
		}
	default:
		return none{}
	}
}

// rebase turns a stored failure time, a wall-clock reading of the
// JobManager that recorded it, into one on the clock of now. Only the span
// up to now can be measured on the wall clock (the last failure may be
// another process's); the healthy period from there on is then measured
// on now's monotonic clock, so that the wall clock being set afterwards
// neither grants a failing job a fresh set of attempts nor withholds
// them. A failure after now is a clock difference between JobManagers (or
// a clock set back) and counts as now.
func rebase(last, now time.Time) time.Time {
	if last.IsZero() || now.IsZero() {
		return last
	}
	return now.Add(-max(now.Round(0).Sub(last), 0))
}

type none struct{}

func (none) Failure(time.Time) (time.Duration, bool) { return 0, false }
func (none) Describe() string                        { return "restart strategy none" }
func (none) Budget() Budget                          { return Budget{} }

// fixedDelay allows attempts restarts in the job's life, each after delay.
type fixedDelay struct {
	attempts int
	delay    time.Duration
	used     int
}

func (f *fixedDelay) Failure(time.Time) (time.Duration, bool) {
	if f.used >= f.attempts {
		return 0, false
	}
	f.used++
	return f.delay, true
}

func (f *fixedDelay) Budget() Budget { return Budget{Used: f.used} }

func (f *fixedDelay) Describe() string {
	return fmt.Sprintf("fixed-delay restart strategy (%d attempts, %d used)", f.attempts, f.used)
}

// exponentialDelay doubles (multiplies) the wait after every failure up to
// max, and starts over once the job ran longer than reset without failing.
// attempts bounds the restarts between resets (Flink 1.19 semantics).
type exponentialDelay struct {
	attempts   int
	initial    time.Duration
	max        time.Duration
	multiplier float64
	reset      time.Duration

	current     time.Duration
	used        int
	lastFailure time.Time
}

func (e *exponentialDelay) Failure(now time.Time) (time.Duration, bool) {
	if !e.lastFailure.IsZero() && now.Sub(e.lastFailure) >= e.reset+e.current {
		// A healthy period since the last restart: start over.
		e.current, e.used = 0, 0
	}
	e.lastFailure = now
	if e.attempts > 0 && e.used >= e.attempts {
		return 0, false
	}
	e.used++
	if e.current == 0 {
		e.current = e.initial
	} else {
		e.current = min(time.Duration(float64(e.current)*e.multiplier), e.max)
	}
	return e.current, true
}

func (e *exponentialDelay) Budget() Budget {
	return Budget{Used: e.used, Current: e.current, LastFailure: e.lastFailure}
}

func (e *exponentialDelay) Describe() string {
	return fmt.Sprintf("exponential-delay restart strategy (%d attempts since the last reset, %d used)", e.attempts, e.used)
}
