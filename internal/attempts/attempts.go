// Package attempts is a TaskManager's table of the subtask attempts it
// holds, as a state machine without I/O: which are being deployed, which
// run, and which were cancelled before their deployment arrived.
//
// The JobManager sends DeployTask and CancelTask on separate calls, so a
// cancel can overtake the deploy it cancels (or arrive while the deploy is
// still building the subtask). Answering "unknown" and forgetting it would
// let the late deploy start an attempt nobody knows: a zombie that writes
// output beside its replacement and holds a slot listed free. The table
// keeps a tombstone for every attempt cancelled before it was known, and
// refuses its deploy; a cancel of an attempt being deployed is remembered
// and applied the moment the deploy has built it. Attempt IDs are unique
// (they carry the JobManager's session), so a tombstone never refuses a
// legitimate deploy; it only needs to outlive the deploy's call, and
// expires after TombstoneTTL.
package attempts

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/putback"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TombstoneTTL bounds how long a cancel of an unknown attempt is
// remembered: far beyond any deploy call's timeout.
const TombstoneTTL = 10 * time.Minute

// MaxTombstones bounds the memory tombstones take, whatever the rate of
// cancels of unknown attempts; the oldest go first.
const MaxTombstones = 1 << 16

// ErrCancelled refuses a deploy of an attempt cancelled before it arrived.
var ErrCancelled = errors.New("attempts: cancelled before its deployment arrived")

// ErrExists refuses a second deploy of an attempt held already.
var ErrExists = errors.New("attempts: already deployed")

// State is where an attempt the table holds is.
type State int

const (
	// Deploying: the deploy call is building the subtask.
	Deploying State = iota + 1
	// Running: the subtask was started; it stays until it ends.
	Running
)

func (s State) String() string {
	switch s {
	case Deploying:
		return "deploying"
	case Running:
		return "running"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Cancel is what a cancel found.
type Cancel int

const (
	// Unknown: the attempt is not held (not yet deployed, or over); a
	// tombstone now refuses its deploy.
	Unknown Cancel = iota
	// WhileDeploying: the deploy call is building it; it must not start
	// (Started says so), and is reported cancelled.
	WhileDeploying
	// Stop: it runs; the caller stops it.
	Stop
)

type entry struct {
	attempt   *weirv1.ExecutionAttemptID
	state     State
	cancelled bool
}

type tombstone struct {
	key string
	at  time.Time
}

// Table is a TaskManager's attempts. It is not safe for concurrent use:
// its owner serializes the calls.
type Table struct {
	live map[string]*entry
	dead map[string]time.Time
	// order is the tombstones oldest first, for expiry.
	order []tombstone
}

// New returns an empty table.
func New() *Table {
	return &Table{live: map[string]*entry{}, dead: map[string]time.Time{}}
}

// Deploy reserves the attempts of one deploy call (a chain deploys
// together) as Deploying. It refuses all of them when any was cancelled
// before (ErrCancelled) or is held already (ErrExists).
func (t *Table) Deploy(attempts []*weirv1.ExecutionAttemptID, now time.Time) error {
	t.expire(now)
	for _, a := range attempts {
		k := a.Key()
		if _, ok := t.dead[k]; ok {
			return fmt.Errorf("%w: %s", ErrCancelled, k)
		}
		if _, ok := t.live[k]; ok {
			return fmt.Errorf("%w: %s", ErrExists, k)
		}
	}
	for _, a := range attempts {
		t.live[a.Key()] = &entry{attempt: a, state: Deploying}
	}
	return nil
}

// Started moves a deploy's attempts to Running once built. It reports
// false when any of them was cancelled meanwhile: the caller must not run
// them, reports them cancelled and calls Ended.
func (t *Table) Started(attempts []*weirv1.ExecutionAttemptID) bool {
	for _, a := range attempts {
		if e := t.live[a.Key()]; e == nil || e.cancelled {
			return false
		}
	}
	for _, a := range attempts {
		t.live[a.Key()].state = Running
	}
	return true
}

// Cancel records a cancel of attempt a.
func (t *Table) Cancel(a *weirv1.ExecutionAttemptID, now time.Time) Cancel {
	t.expire(now)
	key := a.Key()
	e := t.live[key]
	if putback.Active(putback.CancelOvertakesDeploy) && (e == nil || e.state == Deploying) {
		return Unknown // the attempt is not known yet, and nothing remembers the cancel
	}
	switch {
	case e == nil:
		if _, ok := t.dead[key]; !ok {
			t.dead[key] = now
			t.order = append(t.order, tombstone{key, now})
			if len(t.order) > MaxTombstones {
				delete(t.dead, t.order[0].key)
				t.order = t.order[1:]
			}
		}
		return Unknown
	case e.state == Deploying:
		e.cancelled = true
		return WhileDeploying
	default:
		return Stop
	}
}

// Ended forgets attempts that stopped (or whose deploy failed). An attempt
// is deployed once: it does not come back, so no tombstone is needed.
func (t *Table) Ended(attempts []*weirv1.ExecutionAttemptID) {
	for _, a := range attempts {
		delete(t.live, a.Key())
	}
}

// State is where attempt a is; 0 when the table does not hold it.
func (t *Table) State(a *weirv1.ExecutionAttemptID) State {
	if e := t.live[a.Key()]; e != nil {
		return e.state
	}
	return 0
}

// Live lists the attempts held (deploying or running), sorted: what the
// TaskManager reports with each heartbeat, so that the JobManager cancels
// those it does not know.
func (t *Table) Live() []*weirv1.ExecutionAttemptID {
	out := make([]*weirv1.ExecutionAttemptID, 0, len(t.live))
	for _, e := range t.live {
		out = append(out, e.attempt)
	}
	slices.SortFunc(out, func(a, b *weirv1.ExecutionAttemptID) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// Tombstones is the number of cancels of unknown attempts remembered.
func (t *Table) Tombstones() int { return len(t.dead) }

func (t *Table) expire(now time.Time) {
	n := 0
	for n < len(t.order) && now.Sub(t.order[n].at) >= TombstoneTTL {
		delete(t.dead, t.order[n].key)
		n++
	}
	t.order = t.order[n:]
}
