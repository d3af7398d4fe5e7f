package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/putback"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Adoption is what a new leader knows of the attempts the previous one
// ran: the current attempt of every subtask, as the previous leader
// recorded it before deploying it. A job built with one waits, from
// StartAdoption and for Window, for its TaskManagers to report those
// attempts, and takes over the ones they still run instead of
// redeploying them.
//
// Why the record and not the reports alone: a TaskManager may still run
// an attempt the previous leader had replaced (its cancel did not arrive),
// whose output was already redone by its successor. Only an attempt the
// record names was current, and a region is adopted only when all its
// subtasks are, so the adopted attempts were connected to each other and
// to nothing else.
type Adoption struct {
	// Attempts are the recorded attempts with the TaskManager each was
	// deployed to: only that TaskManager's report places it.
	Attempts []Placed
	// Window is how long the job waits for the reports once
	// StartAdoption was called: the TaskManagers can register from then.
	Window time.Duration
}

// AttemptReport is a TaskManager's word on an attempt it runs, or ran.
type AttemptReport struct {
	Attempt    *weirv1.ExecutionAttemptID
	State      weirv1.ExecutionState
	EndOfInput bool
	Cause      string
	// Stopping: the subtask took a stop-with-savepoint's snapshot and
	// waits for its end, which a new leader cannot give it: not adopted.
	Stopping bool
}

// adoptFrom starts the adoption: each subtask takes its recorded attempt,
// not placed anywhere until a TaskManager reports it. False when the
// record does not fit the job's graph (a rescale the record predates), and
// the job deploys as a new one.
func (j *Job) adoptFrom(a *Adoption) bool {
	if a == nil || len(a.Attempts) != len(j.execs) {
		return false
	}
	byName := make(map[string]Placed, len(a.Attempts))
	for _, at := range a.Attempts {
		byName[subtaskKey(at.Attempt)] = at
	}
	j.recordedOn = map[string]string{}
	for _, e := range j.execs {
		at, ok := byName[subtaskKey(e.Attempt)]
		if !ok || at.Attempt.GetJobId() != j.cfg.JobID {
			return false
		}
		e.Attempt = proto.Clone(at.Attempt).(*weirv1.ExecutionAttemptID)
		j.recordedOn[e.Attempt.Key()] = at.TaskManager
	}
	j.pending[0].phase = adopting
	j.adoptWindow = a.Window
	j.runningSeen = map[string]bool{}
	return true
}

// StartAdoption starts the adoption's window: the TaskManagers can report
// from now on (the leader recovered every job).
func (j *Job) StartAdoption() {
	if !j.Adopting() || !j.adoptBy.IsZero() {
		return
	}
	j.adoptBy = j.clock.Now().Add(j.adoptWindow)
	j.emit(ArmAdoption{At: j.adoptBy})
}

func subtaskKey(a *weirv1.ExecutionAttemptID) string {
	return fmt.Sprintf("%s/%d", a.GetVertex(), a.GetSubtaskIndex())
}

// Adopting reports whether the job waits for its attempts to be reported.
func (j *Job) Adopting() bool {
	r, ok := j.pending[0]
	return ok && r.phase == adopting
}

// Report applies a TaskManager's report of an attempt: at its
// registration, or a state change it sends. While the job adopts, an
// attempt the record names is placed on taskManager with the reported
// state; afterwards a report is a state change as TaskStateChanged takes
// it. keep says whether the TaskManager is to go on running the attempt;
// known whether the attempt is one of the job's current ones.
func (j *Job) Report(taskManager string, r AttemptReport) (keep, known bool) {
	e := j.find(r.Attempt)
	if e == nil && j.Adopting() && putback.Active(putback.AdoptUnrecorded) {
		for _, x := range j.execs {
			if subtaskKey(x.Attempt) == subtaskKey(r.Attempt) && x.TaskManager == "" {
				x.Attempt, e = proto.Clone(r.Attempt).(*weirv1.ExecutionAttemptID), x
			}
		}
	}
	if !j.Adopting() {
		// A TaskManager registering again with this leader: what it runs
		// goes on if this leader placed it there and it is still current.
		if e == nil || e.TaskManager != taskManager || e.Terminal() || e.State == weirv1.ExecutionState_EXECUTION_STATE_CREATED {
			return false, e != nil
		}
		if r.State != e.State && (r.State.Terminal() || r.State == weirv1.ExecutionState_EXECUTION_STATE_RUNNING) {
			j.TaskStateChanged(r.Attempt, r.State, r.Cause)
		}
		if r.EndOfInput && !e.Terminal() {
			j.EndOfInput(r.Attempt)
		}
		return !e.Terminal(), true
	}
	if e == nil {
		return false, false
	}
	if e.TaskManager != "" && e.TaskManager != taskManager {
		// The record names one attempt; two TaskManagers cannot both run it.
		return false, true
	}
	if on := j.recordedOn[e.Attempt.Key()]; on != "" && on != taskManager && !putback.Active(putback.AdoptUnrecorded) {
		// It was deployed elsewhere: only its own TaskManager speaks for
		// it (under mutual TLS, with the certificate recorded with it).
		return false, true
	}
	if e.Terminal() {
		return false, true
	}
	e.TaskManager = taskManager
	switch r.State {
	case weirv1.ExecutionState_EXECUTION_STATE_CREATED, weirv1.ExecutionState_EXECUTION_STATE_SCHEDULED, weirv1.ExecutionState_EXECUTION_STATE_DEPLOYING:
		e.State = weirv1.ExecutionState_EXECUTION_STATE_DEPLOYING
		if j.runningSeen[e.Attempt.Key()] {
			// Its RUNNING overtook the registration, which was prepared
			// before it.
			e.State = weirv1.ExecutionState_EXECUTION_STATE_RUNNING
		}
	default:
		e.State = r.State
	}
	e.EndOfInput = e.EndOfInput || r.EndOfInput
	e.Failure = r.Cause
	if r.Stopping && !e.Terminal() {
		// Its savepoint's end will not come: the region restarts from
		// the latest checkpoint (the savepoint itself if it completed).
		e.State, e.Failure = weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "it was stopping with a savepoint when its leader was lost"
	}
	if e.Start.IsZero() {
		e.Start = j.clock.Now()
	}
	if e.Terminal() {
		e.End = j.clock.Now()
	}
	if j.adoptionSettled() {
		j.endAdoption("")
	}
	return !e.Terminal(), true
}

// notAdopted ends the attempts the job was waiting for, when it stops
// adopting otherwise (cancelled, failed, suspended): a report of one of
// them afterwards is for an attempt this leader never placed, and is not
// kept.
func (j *Job) notAdopted() {
	if j.Adopting() {
		j.cancelUnplaced(func(*Exec) bool { return true })
	}
}

// cancelUnplaced takes the recorded attempts that match selects and no
// TaskManager reported as over: never this leader's, they are not waited
// for, and a restart gives their subtasks new attempt numbers.
func (j *Job) cancelUnplaced(match func(*Exec) bool) {
	for _, e := range j.execs {
		if e.TaskManager == "" && e.State == weirv1.ExecutionState_EXECUTION_STATE_CREATED && match(e) {
			e.State = weirv1.ExecutionState_EXECUTION_STATE_CANCELED
		}
	}
}

// adoptionSettled reports whether every subtask's attempt was reported,
// running or ended: nothing more can be learnt by waiting.
func (j *Job) adoptionSettled() bool {
	for _, e := range j.execs {
		if e.TaskManager == "" && !e.Terminal() {
			return false
		}
	}
	return true
}

// AdoptionDue is the adoption's deadline passing: what was not reported
// by then is not adopted.
func (j *Job) AdoptionDue() {
	if !j.Adopting() || j.clock.Now().Before(j.adoptBy) {
		return
	}
	j.endAdoption("not reported by any TaskManager within the adoption window")
}

// adoptionLost marks the attempts placed on a TaskManager that went away
// while the job adopts them: their regions are not adopted. False when
// the job does not adopt.
func (j *Job) adoptionLost(taskManager string) bool {
	if !j.Adopting() {
		return false
	}
	for _, e := range j.execs {
		if e.TaskManager == taskManager && !e.Terminal() {
			e.State, e.Failure, e.End = weirv1.ExecutionState_EXECUTION_STATE_FAILED, "its TaskManager was lost during the adoption", j.clock.Now()
		}
	}
	if j.adoptionSettled() {
		j.endAdoption("")
	}
	return true
}

// endAdoption takes over the regions whose subtasks all run (or, for a
// job all of whose subtasks finished, ends it) and restarts the others
// from the latest checkpoint, as the previous leader's failover would
// have. why explains the subtasks not reported.
func (j *Job) endAdoption(why string) {
	r := j.pending[0]
	delete(j.pending, 0)
	for reg := range r.regions {
		delete(j.busy, reg)
	}
	finished, live := 0, 0
	missing := map[int][]string{}
	for _, e := range j.execs {
		switch {
		case e.State == weirv1.ExecutionState_EXECUTION_STATE_FINISHED:
			finished++
		case e.Terminal():
			cause := e.Failure
			if cause == "" {
				cause = "it " + strings.ToLower(strings.TrimPrefix(e.State.String(), "EXECUTION_STATE_"))
			}
			missing[e.Region] = append(missing[e.Region], fmt.Sprintf("%s: %s", e.Name(), cause))
		case e.TaskManager == "":
			missing[e.Region] = append(missing[e.Region], fmt.Sprintf("%s: %s", e.Name(), why))
		default:
			live++
		}
	}
	now := j.clock.Now()
	if finished == len(j.execs) {
		j.start = now
		j.transition(weirv1.JobState_JOB_STATE_RUNNING)
		j.finish(weirv1.JobState_JOB_STATE_FINISHED)
		return
	}
	if len(missing) == 0 && finished == 0 {
		j.start = now
		j.transition(weirv1.JobState_JOB_STATE_RUNNING)
		j.emit(Adopted{Execs: j.copyExecs()})
		j.adopted = true
		j.maybeStartCheckpoints()
		j.maybeFinalCheckpoint()
		return
	}
	if live == 0 && finished == 0 {
		// Nothing to take over: the job deploys as a new leader's always
		// did.
		j.cancelUnplaced(func(*Exec) bool { return true })
		j.recordException(Exception{Time: now, Cause: "no subtask adopted after the change of leader: " + strings.Join(flatten(missing), "; ")})
		j.pending[0] = r
		r.phase = scheduling
		for reg := range r.regions {
			j.busy[reg] = 0
		}
		j.emit(AwaitSlots{Restart: 0})
		return
	}
	// Some regions run and some do not. A region is restarted whole; with
	// a subtask finished, every region is (as after any failure that
	// follows a finish: the finished ones cannot take part in another
	// final checkpoint).
	regions := map[int]bool{}
	for reg := range missing {
		regions[reg] = true
	}
	full := finished > 0 || len(regions) == j.regions
	if full {
		regions = j.allRegions()
	}
	j.cancelUnplaced(func(e *Exec) bool { return regions[e.Region] })
	j.start = now
	j.transition(weirv1.JobState_JOB_STATE_RUNNING)
	adopted := []Exec{}
	for _, e := range j.execs {
		if !regions[e.Region] {
			adopted = append(adopted, *e)
		}
	}
	if len(adopted) > 0 {
		j.emit(Adopted{Execs: adopted})
		j.adopted = true
	}
	cause := "not adopted after the change of leader: " + strings.Join(flatten(missing), "; ")
	if len(missing) == 0 {
		cause = "not adopted after the change of leader: some subtasks finished while others still run"
	}
	j.generation++
	j.cause = cause
	nr := &pendingRestart{id: j.nextRestart, regions: regions, full: full}
	j.nextRestart++
	if full {
		j.transition(weirv1.JobState_JOB_STATE_RESTARTING)
	}
	j.occupy(nr)
	ex := Exception{Time: now, Cause: cause, Regions: sortedRegions(regions), Full: full}
	j.recordException(ex)
	j.emit(RestartStarted{Restart: nr.id, Regions: ex.Regions, Full: full, Cause: cause})
	j.cancel(func(e *Exec) bool { return regions[e.Region] })
	j.settle()
}

func flatten(m map[int][]string) []string {
	var out []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[r]...)
	}
	return out
}

func (j *Job) copyExecs() []Exec {
	out := make([]Exec, 0, len(j.execs))
	for _, e := range j.execs {
		out = append(out, *e)
	}
	return out
}

// CurrentAttempts lists every subtask's current attempt and the
// TaskManager it is placed on: what a leader records before it deploys,
// for the next one to adopt.
func (j *Job) CurrentAttempts() []Placed {
	out := make([]Placed, 0, len(j.execs))
	for _, e := range j.execs {
		out = append(out, Placed{Attempt: proto.Clone(e.Attempt).(*weirv1.ExecutionAttemptID), TaskManager: e.TaskManager})
	}
	return out
}

// Placed is an attempt and the TaskManager it runs on ("" when not
// placed).
type Placed struct {
	Attempt     *weirv1.ExecutionAttemptID
	TaskManager string
}
