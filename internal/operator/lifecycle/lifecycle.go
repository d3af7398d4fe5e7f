// Package lifecycle is the life of a WeirJob as a pure state machine:
// Decide reads what the operator observed (the resource's spec and stored
// status, the job as its JobManager reports it, the time) and returns the
// status to store and at most one action for the driver to carry out;
// Complete folds the action's outcome into the status. The driver (the
// operator's reconciler) does the I/O and nothing else, so every upgrade,
// suspension, rollback and recovery path is tested here with no API server
// and no JobManager.
//
// An upgrade moves through phases kept in status.upgrade:
//
//	(spec changed) ── Stopping ──► Starting ──► Verifying ──► RUNNING
//	                  stop by mode   submit       job RUNNING?
//	                  (savepoint,    the target   │ failed, or not within
//	                  cancel+last    spec from    │ the rollback timeout
//	                  checkpoint,    the path     ▼
//	                  cancel)                    Stopping(rollback) ──► Starting ──► Verifying ──► ROLLED_BACK
//
// A first deployment, a resume and the recovery of a job its JobManager
// lost start at Starting.
package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// Phases of an upgrade.
const (
	PhaseStopping  = "Stopping"
	PhaseStarting  = "Starting"
	PhaseVerifying = "Verifying"
)

// Condition types.
const (
	CondReady     = "Ready"
	CondUpgrading = "Upgrading"
)

// DefaultRollbackTimeout is how long a new job may take to reach RUNNING.
const DefaultRollbackTimeout = 2 * time.Minute

// maxSavepoints bounds the savepoint history in the status.
const maxSavepoints = 10

// Job is the job as the JobManager reports it.
type Job struct {
	// State is the JobManager's job state: RUNNING, FAILED, ...
	State string
	// FailureCause is why it failed or restarts.
	FailureCause string
	// LatestCheckpoint is its newest completed checkpoint or savepoint,
	// if any.
	LatestCheckpoint *v1alpha1.CheckpointInfo
	// StartedFrom is the savepoint or checkpoint it was submitted to
	// restore ("" for none).
	StartedFrom string
}

// Observation is what the driver saw in one round.
type Observation struct {
	Now time.Time
	// UID is the resource's: with the upgrade it names the jobs it
	// submits (Action.JobID).
	UID        string
	Generation int64
	Spec       v1alpha1.WeirJobSpec
	Status     v1alpha1.WeirJobStatus
	// Reachable: the JobManager answered.
	Reachable bool
	// Job is Status.JobID as the JobManager reports it; nil when there
	// is no job ID or the JobManager does not know it.
	Job *Job
	// Next is the newest job of those JobIDAt names from
	// Status.Submissions on, and NextSeq its number: jobs submitted by
	// rounds whose status writes were lost. Nil while there is none.
	Next    *Job
	NextSeq int64
}

// ActionKind is one I/O step of the driver.
type ActionKind string

const (
	None ActionKind = ""
	// Submit submits Action.Spec's job, restored from Action.RestorePath.
	Submit ActionKind = "Submit"
	// StopWithSavepoint stops the job, taking a savepoint.
	StopWithSavepoint ActionKind = "StopWithSavepoint"
	// CancelKeepingState cancels the job and reports its latest
	// completed checkpoint (retained on cancellation).
	CancelKeepingState ActionKind = "CancelKeepingState"
	// Cancel cancels the job.
	Cancel ActionKind = "Cancel"
	// TriggerSavepoint takes a savepoint of the running job.
	TriggerSavepoint ActionKind = "TriggerSavepoint"
)

// Action is what Decide asks the driver to do.
type Action struct {
	Kind ActionKind
	// Spec is the spec to submit (the desired one, or the stable one of
	// a rollback).
	Spec v1alpha1.WeirJobSpec
	// RestorePath is where a submitted job starts from.
	RestorePath string
	// JobID is the ID a submitted job gets: the same for every attempt
	// at one step of one upgrade, so that a submission retried after a
	// lost answer (or by a reconcile that read a stale status) is
	// answered with the job the first one started.
	JobID string
	// Reason says why, for the savepoint history.
	Reason string
}

// Result is the outcome of an action.
type Result struct {
	// JobID of a submitted job.
	JobID string
	// Path of a savepoint taken, or of the latest checkpoint of a job
	// cancelled keeping state ("" when it had none).
	Path string
	// Savepoint: Path is a savepoint (a job cancelled keeping state may
	// have taken one after its last checkpoint).
	Savepoint bool
	// Exists: the submission's job ID names a job that runs another
	// graph, one an earlier round submitted and whose status write was
	// lost.
	Exists bool
	// Refused: the JobManager refused the submission and started nothing
	// (the spec does not make a valid job, the state to restore is
	// unreadable, a claim is held): a newer spec or a suspension may
	// replace the step.
	Refused bool
	Err     error
}

// Event is something users should see on the resource.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Decision is what Decide returns.
type Decision struct {
	Status v1alpha1.WeirJobStatus
	Action Action
	Events []Event
	// Deploy is the spec the cluster's objects (Deployments) should run
	// now: see deploySpec.
	Deploy v1alpha1.WeirJobSpec
	// Suspended scales the job's own TaskManagers to zero: only once the
	// job stopped, so that a savepoint is not taken from TaskManagers on
	// their way out.
	Suspended bool
	// Requeue asks for the next round after this long (0: on changes
	// only).
	Requeue time.Duration
}

// SpecHash is a hash of what a running job depends on in spec.
func SpecHash(spec v1alpha1.WeirJobSpec) string {
	spec.SavepointTriggerNonce, spec.Suspend, spec.Rollback, spec.InitialSavepointPath = 0, false, nil, ""
	b, _ := json.Marshal(spec)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Decide is one round of the WeirJob's state machine.
func Decide(o Observation) Decision {
	d := decide(o)
	d.Deploy = deploySpec(o, &d.Status)
	return d
}

func decide(o Observation) Decision {
	d := Decision{Status: *o.Status.DeepCopy()}
	st := &d.Status
	st.ObservedGeneration = o.Generation
	if o.Job != nil {
		st.JobState = o.Job.State
		// Only the current job's own checkpoints are newer than what it
		// started from; a stopped one's are not.
		if cp := o.Job.LatestCheckpoint; cp != nil && jobRunning(o.Job) && (st.Upgrade == nil || st.Upgrade.Phase == PhaseVerifying) {
			st.LastCheckpoint = cp.DeepCopy()
		}
	}
	if !o.Reachable {
		// Nothing is known of the job: nothing changes.
		setCondition(st, CondReady, false, "JobManagerUnreachable", "the JobManager does not answer", o.Now)
		d.Requeue = 2 * time.Second
		return d
	}
	switch {
	case o.Next == nil:
	case st.Upgrade != nil && st.Upgrade.Phase == PhaseStarting && o.NextSeq == st.Submissions:
		// The status is older than a submission of this step: its retry
		// finds the job (or learns that it runs another graph). A refusal
		// recorded before it no longer holds.
		st.Upgrade.Refused = false
	default:
		// The status is older than a submission: take its job on, to be
		// stopped and replaced as an old job is.
		o = adoptEarlierSubmission(o, &d)
	}
	replaceUpgrade(o, st)
	switch {
	case st.Upgrade != nil:
		decideUpgrade(o, &d)
	case o.Spec.Suspend:
		decideSuspend(o, &d)
	case st.LifecycleState == v1alpha1.StateSuspended:
		// Resume.
		startUpgrade(o, &d, PhaseStarting, st.ResumeFrom, "resume", false)
		d.Events = append(d.Events, Event{Reason: "Resuming", Message: "resuming the job from " + orNone(st.ResumeFrom)})
	case st.JobID == "" && st.Submissions == 0:
		startUpgrade(o, &d, PhaseStarting, o.Spec.InitialSavepointPath, "initial", false)
		st.LifecycleState = v1alpha1.StateDeploying
	case st.JobID == "":
		// A suspension that had no job to stop: start from where the
		// last job stopped.
		startUpgrade(o, &d, PhaseStarting, st.ResumeFrom, "resume", false)
	case o.Job == nil:
		// The JobManager lost the job (a cluster without its HA data):
		// start it again from the newest state the operator knows.
		path := latestPath(st)
		d.Events = append(d.Events, jobLost(st.JobID, path))
		startUpgrade(o, &d, PhaseStarting, path, "recover", false)
	case st.DeployedSpecHash != SpecHash(o.Spec) && !failedBefore(o, st):
		decideSpecChange(o, &d)
	default:
		decideSteady(o, &d)
	}
	if d.Action.Kind != None && d.Requeue == 0 {
		d.Requeue = 200 * time.Millisecond
	}
	return d
}

// adoptEarlierSubmission makes o.Next the resource's job, in an upgrade
// that stops it first.
func adoptEarlierSubmission(o Observation, d *Decision) Observation {
	st := &d.Status
	id := JobIDAt(o.UID, o.NextSeq)
	d.Events = append(d.Events, Event{Warning: true, Reason: "EarlierSubmission", Message: fmt.Sprintf("job %s was submitted by an earlier round whose status was lost: stopping it first", id)})
	st.JobID, st.JobState, st.DeployedSpecHash, st.LastCheckpoint = id, o.Next.State, "", nil
	st.Submissions = o.NextSeq + 1
	now := metav1.NewTime(o.Now)
	if up := st.Upgrade; up != nil {
		up.Phase, up.StartedAt = PhaseStopping, &now
		if !up.Rollback {
			up.RestorePath = ""
		}
	} else {
		st.Upgrade = &v1alpha1.UpgradeStatus{Phase: PhaseStopping, Target: o.Generation, Spec: encodeSpec(o.Spec), Reason: "upgrade", StartedAt: &now}
		st.LifecycleState = v1alpha1.StateUpgrading
	}
	o.Job, o.Next = o.Next, nil
	return o
}

// replaceUpgrade ends or retargets an upgrade the resource's spec has
// moved past. An upgrade whose new job may have been submitted (Starting)
// always finishes that step, so that a submission whose status write was
// lost is not left running beside the next one.
func replaceUpgrade(o Observation, st *v1alpha1.WeirJobStatus) {
	up := st.Upgrade
	if up == nil {
		return
	}
	changed := st.DeployedSpecHash != SpecHash(o.Spec)
	switch {
	case up.Phase == PhaseVerifying && !up.Rollback && changed:
		// A newer spec replaces one still being verified.
		st.Upgrade = nil
	case up.Phase == PhaseVerifying && up.Rollback && changed && !failedBefore(o, st):
		// A new spec replaces a rollback, also one whose stable spec
		// fails too.
		st.Upgrade = nil
	case o.Spec.Suspend && (up.Phase == PhaseVerifying || up.Phase == PhaseStopping && !up.Rollback):
		// Suspension stops whichever job runs, verified or not.
		st.Upgrade = nil
	case up.Phase == PhaseStarting && up.Refused && o.Spec.Suspend:
		// The refused submission started nothing: suspend with the state
		// it was to start from.
		st.Upgrade = nil
		if o.Job == nil {
			st.ResumeFrom, st.LastCheckpoint = up.RestorePath, nil
		}
	case up.Spec != "" && up.Target != o.Generation &&
		(up.Phase == PhaseStopping && !up.Rollback || up.Phase == PhaseStarting && up.Refused && (!up.Rollback || !failedBefore(o, st))):
		// Nothing was submitted yet (or the last submission was refused):
		// aim at the newest spec; a refused rollback becomes the upgrade
		// to a spec that did not fail.
		if target, ok := decodeSpec(up.Spec); !ok || SpecHash(target) != SpecHash(o.Spec) {
			if up.Rollback && modeOf(o.Spec) != v1alpha1.UpgradeStateless {
				// The failed job's newest state, not the older one the
				// rollback was to restore: it may have committed output.
				up.RestorePath = newestState(o, st)
			}
			up.Target, up.Spec, up.Refused, up.Rollback, up.Reason = o.Generation, encodeSpec(o.Spec), false, false, "upgrade"
			st.LifecycleState = v1alpha1.StateUpgrading
		}
	}
}

// failedBefore says whether the resource's spec is one whose upgrade was
// rolled back: it is not tried again until the spec changes.
func failedBefore(o Observation, st *v1alpha1.WeirJobStatus) bool {
	if st.FailedSpecHash != "" {
		return SpecHash(o.Spec) == st.FailedSpecHash
	}
	return o.Generation == st.FailedGeneration
}

// deploySpec is the spec the cluster's objects run: the stable one while
// the old job still has to stop, the upgrade's target (for a rollback,
// the stable spec) while its job starts and runs.
func deploySpec(o Observation, st *v1alpha1.WeirJobStatus) v1alpha1.WeirJobSpec {
	up := st.Upgrade
	if up == nil {
		return o.Spec
	}
	if up.Phase == PhaseStopping && !up.Rollback {
		if stable, ok := stableSpec(st); ok {
			return stable
		}
		return o.Spec
	}
	return targetSpec(o, st, up)
}

// targetSpec is the spec an upgrade submits.
func targetSpec(o Observation, st *v1alpha1.WeirJobStatus, up *v1alpha1.UpgradeStatus) v1alpha1.WeirJobSpec {
	if spec, ok := decodeSpec(up.Spec); ok {
		return spec
	}
	if up.Rollback {
		if stable, ok := stableSpec(st); ok {
			return stable
		}
	}
	return o.Spec // an upgrade recorded before targets were kept
}

func encodeSpec(spec v1alpha1.WeirJobSpec) string {
	b, _ := json.Marshal(spec)
	return string(b)
}

func decodeSpec(s string) (v1alpha1.WeirJobSpec, bool) {
	var spec v1alpha1.WeirJobSpec
	if s == "" || json.Unmarshal([]byte(s), &spec) != nil {
		return spec, false
	}
	return spec, true
}

func jobLost(id, path string) Event {
	return Event{Warning: true, Reason: "JobLost", Message: fmt.Sprintf("the JobManager does not know job %s; submitting it again from %s", id, orNone(path))}
}

func orNone(path string) string {
	if path == "" {
		return "no state"
	}
	return path
}

// latestPath is the newest state of the job the operator recorded: the
// current job's latest checkpoint, else what it started from.
func latestPath(st *v1alpha1.WeirJobStatus) string {
	if st.LastCheckpoint != nil && st.LastCheckpoint.Path != "" {
		return st.LastCheckpoint.Path
	}
	return st.ResumeFrom
}

// newestState is the newest state of the job that stopped: its own newest
// savepoint or checkpoint as its JobManager reports it, which a lost
// status write or a stop whose answer timed out cannot lose; else the
// newest the operator recorded.
func newestState(o Observation, st *v1alpha1.WeirJobStatus) string {
	if o.Job == nil {
		return latestPath(st)
	}
	if cp := o.Job.LatestCheckpoint; cp != nil && cp.Path != "" {
		return cp.Path
	}
	// Its JobManager reports none (a new leader that recovered it has no
	// statistics until its next checkpoint): the one recorded of this
	// job, else what it started from.
	if cp := st.LastCheckpoint; cp != nil && cp.Path != "" {
		return cp.Path
	}
	return o.Job.StartedFrom
}

func startUpgrade(o Observation, d *Decision, phase, restore, reason string, rollback bool) {
	st := &d.Status
	now := metav1.NewTime(o.Now)
	st.Upgrade = &v1alpha1.UpgradeStatus{Phase: phase, Target: o.Generation, Spec: encodeSpec(o.Spec), RestorePath: restore, Reason: reason, Rollback: rollback, StartedAt: &now}
	if rollback {
		st.Upgrade.Target, st.Upgrade.Spec = st.StableGeneration, st.StableSpec
	}
	st.LifecycleState = v1alpha1.StateUpgrading
	if rollback {
		st.LifecycleState = v1alpha1.StateRollingBack
	}
	setCondition(st, CondUpgrading, true, reason, "moving the job to generation "+fmt.Sprint(st.Upgrade.Target), o.Now)
	decideUpgrade(o, d)
}

// stopAction stops the running job as mode says.
func stopAction(mode v1alpha1.UpgradeMode) ActionKind {
	switch mode {
	case v1alpha1.UpgradeStateless:
		return Cancel
	case v1alpha1.UpgradeLastState:
		return CancelKeepingState
	}
	return StopWithSavepoint
}

func decideSpecChange(o Observation, d *Decision) {
	st := &d.Status
	if !jobRunning(o.Job) && o.Spec.UpgradeMode != v1alpha1.UpgradeStateless {
		// Nothing to stop with a savepoint: start from the newest state
		// (last-state), as Flink's operator falls back to.
		path := newestState(o, st)
		d.Events = append(d.Events, Event{Warning: true, Reason: "UpgradeFromLastState", Message: fmt.Sprintf("the job is %s, not running: upgrading from %s instead of a new savepoint", o.Job.State, orNone(path))})
		startUpgrade(o, d, PhaseStarting, path, "upgrade", false)
		return
	}
	d.Events = append(d.Events, Event{Reason: "Upgrading", Message: fmt.Sprintf("upgrading the job to generation %d (%s)", o.Generation, modeOf(o.Spec))})
	startUpgrade(o, d, PhaseStopping, "", "upgrade", false)
}

func modeOf(spec v1alpha1.WeirJobSpec) v1alpha1.UpgradeMode {
	if spec.UpgradeMode == "" {
		return v1alpha1.UpgradeSavepoint
	}
	return spec.UpgradeMode
}

func jobRunning(j *Job) bool {
	return j != nil && (j.State == "RUNNING" || j.State == "RESTARTING" || j.State == "CREATED")
}

func decideUpgrade(o Observation, d *Decision) {
	st := &d.Status
	up := st.Upgrade
	switch up.Phase {
	case PhaseStopping:
		if !jobRunning(o.Job) {
			// Already stopped (by an earlier round whose outcome was
			// lost, or it failed): go on from the newest state.
			if modeOf(o.Spec) != v1alpha1.UpgradeStateless && !up.Rollback {
				up.RestorePath = newestState(o, st)
			}
			up.Phase = PhaseStarting
			decideUpgrade(o, d)
			return
		}
		kind := stopAction(modeOf(o.Spec))
		if up.Rollback {
			kind = Cancel // the rollback restores the state the upgrade started from
		}
		if kind == StopWithSavepoint && o.Job.State != "RUNNING" {
			timeout, _ := rollbackPolicy(o.Spec)
			if !timedOut(o, up, timeout) {
				// A savepoint needs every subtask running: wait for it.
				d.Requeue = time.Second
				return
			}
			// It has not run for the whole timeout (a job that cannot
			// start): no savepoint will come, so stop it keeping its
			// latest checkpoint.
			kind = CancelKeepingState
			d.Events = append(d.Events, Event{Warning: true, Reason: "UpgradeFromLastState", Message: fmt.Sprintf("the job has been %s for %s: no savepoint can be taken, cancelling it keeping its latest checkpoint", o.Job.State, timeout)})
		}
		d.Action = Action{Kind: kind, Reason: up.Reason}
	case PhaseStarting:
		d.Action = Action{Kind: Submit, Spec: targetSpec(o, st, up), RestorePath: up.RestorePath, Reason: up.Reason, JobID: jobID(o.UID, st)}
	case PhaseVerifying:
		timeout, rollback := rollbackPolicy(o.Spec)
		switch {
		case o.Job == nil:
			// The JobManager lost the new job: submit it again, from
			// its own latest checkpoint if it took one.
			path := latestPath(st)
			d.Events = append(d.Events, jobLost(st.JobID, path))
			up.Phase, up.RestorePath = PhaseStarting, path
			decideUpgrade(o, d)
		case o.Job.State == "RUNNING":
			finishUpgrade(o, d)
		case o.Job.State == "FINISHED":
			st.Upgrade = nil
			st.LifecycleState = v1alpha1.StateFinished
			setCondition(st, CondUpgrading, false, "Finished", "the job finished", o.Now)
		case o.Job.State == "CANCELED":
			// Cancelled, not failed: by a stop of the operator's whose
			// outcome was lost, or by a user. The job may have run well
			// and committed output: the step runs again from its newest
			// state, not rolled back to an older one.
			path := newestState(o, st)
			d.Events = append(d.Events, Event{Warning: true, Reason: "JobCancelled", Message: fmt.Sprintf("job %s was cancelled while it was verified; submitting it again from %s", st.JobID, orNone(path))})
			up.Phase, up.RestorePath = PhaseStarting, path
			decideUpgrade(o, d)
		case up.Rollback || !rollback || st.StableSpec == "":
			// Nothing to roll back to (or not asked): wait, and say so.
			if failed(o.Job) || timedOut(o, up, timeout) {
				st.LifecycleState = v1alpha1.StateFailed
				setCondition(st, CondReady, false, "JobNotRunning", fmt.Sprintf("the job is %s after %s: %s", stateOf(o.Job), reasonOf(up), causeOf(o.Job)), o.Now)
			}
			d.Requeue = time.Second
		case failed(o.Job) || timedOut(o, up, timeout):
			msg := fmt.Sprintf("generation %d's job is %s after the upgrade (%s); rolling back to generation %d", up.Target, stateOf(o.Job), causeOf(o.Job), st.StableGeneration)
			d.Events = append(d.Events, Event{Warning: true, Reason: "RollingBack", Message: msg})
			st.FailedGeneration, st.FailedSpecHash = up.Target, SpecHash(targetSpec(o, st, up))
			startUpgrade(o, d, PhaseStopping, up.RestorePath, "rollback", true)
		default:
			// The new job is coming up: the upgrade's gap ends when it
			// is seen RUNNING.
			d.Requeue = 200 * time.Millisecond
		}
	}
}

// rollbackPolicy is how long a new job may take to run, and whether one
// that does not is rolled back.
func rollbackPolicy(spec v1alpha1.WeirJobSpec) (time.Duration, bool) {
	timeout, rollback := DefaultRollbackTimeout, true
	if r := spec.Rollback; r != nil {
		rollback = r.Enabled
		if r.Timeout.Duration > 0 {
			timeout = r.Timeout.Duration
		}
	}
	return timeout, rollback
}

// JobIDAt is the ID of the resource's n-th submission (from 0).
func JobIDAt(uid string, n int64) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", uid, n)))
	return hex.EncodeToString(h[:16])
}

// jobID names the next job the resource submits: a hash of the resource
// and its submissions so far (status.submissions), and nothing else. A
// submission whose status write was lost is retried under the same ID
// whatever changed in between (the spec, the state to restore), so the
// JobManager answers with the job already there, or, when that job runs
// another graph, says so (Result.Exists).
func jobID(uid string, st *v1alpha1.WeirJobStatus) string { return JobIDAt(uid, st.Submissions) }

func failed(j *Job) bool { return j != nil && (j.State == "FAILED" || j.State == "CANCELED") }

func timedOut(o Observation, up *v1alpha1.UpgradeStatus, timeout time.Duration) bool {
	return up.StartedAt != nil && o.Now.Sub(up.StartedAt.Time) > timeout
}

func stateOf(j *Job) string {
	if j == nil {
		return "unknown to the JobManager"
	}
	return j.State
}

func causeOf(j *Job) string {
	if j == nil || j.FailureCause == "" {
		return "no failure cause"
	}
	return j.FailureCause
}

func reasonOf(up *v1alpha1.UpgradeStatus) string {
	if up.Rollback {
		return "the rollback"
	}
	return "the " + up.Reason
}

func finishUpgrade(o Observation, d *Decision) {
	st := &d.Status
	up := st.Upgrade
	st.Upgrade = nil
	setCondition(st, CondUpgrading, false, "Done", "the job runs generation "+fmt.Sprint(up.Target), o.Now)
	if up.Rollback {
		st.LifecycleState = v1alpha1.StateRolledBack
		setCondition(st, CondReady, false, "RolledBack", fmt.Sprintf("generation %d did not reach RUNNING; the job runs generation %d again", st.FailedGeneration, up.Target), o.Now)
		d.Events = append(d.Events, Event{Warning: true, Reason: "RolledBack", Message: fmt.Sprintf("the job runs generation %d again, from %s", up.Target, orNone(up.RestorePath))})
		return
	}
	st.LifecycleState = v1alpha1.StateRunning
	st.StableGeneration = up.Target
	st.StableSpec = encodeSpec(targetSpec(o, st, up))
	st.FailedGeneration, st.FailedSpecHash = 0, ""
	setCondition(st, CondReady, true, "Running", "the job runs generation "+fmt.Sprint(up.Target), o.Now)
	d.Events = append(d.Events, Event{Reason: "JobRunning", Message: fmt.Sprintf("the job runs generation %d (%s, from %s)", up.Target, up.Reason, orNone(up.RestorePath))})
}

func stableSpec(st *v1alpha1.WeirJobStatus) (v1alpha1.WeirJobSpec, bool) {
	return decodeSpec(st.StableSpec)
}

func decideSuspend(o Observation, d *Decision) {
	st := &d.Status
	if st.LifecycleState == v1alpha1.StateSuspended {
		d.Suspended = true
		return
	}
	if !jobRunning(o.Job) {
		st.ResumeFrom = newestState(o, st)
		suspended(o, d)
		return
	}
	kind := stopAction(modeOf(o.Spec))
	if kind == StopWithSavepoint && o.Job.State != "RUNNING" {
		// Wait for it to run, as an upgrade does, at most the timeout
		// since it was last seen running (the Ready condition's last
		// transition).
		setCondition(st, CondReady, false, "Job"+o.Job.State, "suspending: the job is "+o.Job.State, o.Now)
		timeout, _ := rollbackPolicy(o.Spec)
		if c := meta.FindStatusCondition(st.Conditions, CondReady); o.Now.Sub(c.LastTransitionTime.Time) <= timeout {
			d.Requeue = time.Second
			return
		}
		kind = CancelKeepingState
	}
	d.Action = Action{Kind: kind, Reason: "suspend"}
}

func suspended(o Observation, d *Decision) {
	st := &d.Status
	st.LifecycleState = v1alpha1.StateSuspended
	st.JobID, st.JobState = "", ""
	d.Suspended = true
	setCondition(st, CondReady, false, "Suspended", "suspended; resumes from "+orNone(st.ResumeFrom), o.Now)
	d.Events = append(d.Events, Event{Reason: "Suspended", Message: "the job is suspended; it resumes from " + orNone(st.ResumeFrom)})
}

func decideSteady(o Observation, d *Decision) {
	st := &d.Status
	switch o.Job.State {
	case "RUNNING", "CREATED", "RESTARTING":
		if st.LifecycleState != v1alpha1.StateRolledBack {
			st.LifecycleState = v1alpha1.StateRunning
			setCondition(st, CondReady, o.Job.State == "RUNNING", "Job"+o.Job.State, "the job is "+o.Job.State, o.Now)
		}
		if o.Spec.SavepointTriggerNonce != st.SavepointTriggerNonce && o.Job.State == "RUNNING" {
			d.Action = Action{Kind: TriggerSavepoint, Reason: "manual"}
		}
		d.Requeue = 5 * time.Second
	case "FINISHED":
		st.LifecycleState = v1alpha1.StateFinished
		setCondition(st, CondReady, false, "Finished", "the job finished", o.Now)
	default:
		st.LifecycleState = v1alpha1.StateFailed
		setCondition(st, CondReady, false, "Job"+o.Job.State, fmt.Sprintf("the job is %s: %s", o.Job.State, causeOf(o.Job)), o.Now)
		d.Requeue = 5 * time.Second
	}
}

// Complete folds the outcome of d's action into d's status and returns
// the status to store, with events to record.
func Complete(o Observation, d Decision, r Result) (v1alpha1.WeirJobStatus, []Event) {
	st := *d.Status.DeepCopy()
	var events []Event
	now := metav1.NewTime(o.Now)
	if d.Action.Kind == Submit && st.Upgrade != nil {
		// Only the last submission counts: one whose outcome is unknown
		// may have started the job.
		st.Upgrade.Refused = r.Refused && r.Err != nil
	}
	if d.Action.Kind == Submit && r.Exists && st.Upgrade != nil {
		// That job runs beside nothing else of this resource: stop it as
		// an old job is stopped, then submit under the next ID.
		st.JobID, st.JobState, st.DeployedSpecHash, st.Error = d.Action.JobID, "", "", ""
		st.LastCheckpoint = nil // the previous job's
		st.Submissions++
		st.Upgrade.Phase, st.Upgrade.StartedAt = PhaseStopping, &now
		if !st.Upgrade.Rollback {
			st.Upgrade.RestorePath = ""
		}
		events = append(events, Event{Warning: true, Reason: "EarlierSubmission", Message: fmt.Sprintf("job %s was submitted by an earlier round whose status was lost, with another spec or state: stopping it first", d.Action.JobID)})
		return st, events
	}
	if r.Err != nil {
		st.Error = fmt.Sprintf("%s: %v", d.Action.Kind, r.Err)
		events = append(events, Event{Warning: true, Reason: string(d.Action.Kind) + "Failed", Message: r.Err.Error()})
		return st, events
	}
	st.Error = ""
	switch d.Action.Kind {
	case Submit:
		st.JobID, st.JobState = r.JobID, ""
		st.Submissions++
		st.ResumeFrom, st.LastCheckpoint = d.Action.RestorePath, nil
		if up := st.Upgrade; up != nil {
			up.Phase = PhaseVerifying
			up.StartedAt = &now
			st.DeployedGeneration, st.DeployedSpecHash = up.Target, SpecHash(d.Action.Spec)
		}
		if d.Action.RestorePath != "" {
			events = append(events, Event{Reason: "Submitted", Message: fmt.Sprintf("submitted job %s from %s", r.JobID, d.Action.RestorePath)})
		} else {
			events = append(events, Event{Reason: "Submitted", Message: "submitted job " + r.JobID + " without state"})
		}
	case StopWithSavepoint, CancelKeepingState, Cancel:
		if r.Path == "" && d.Action.Kind == CancelKeepingState {
			// No checkpoint since it started: its state is still what
			// it started from.
			r.Path = newestState(o, &st)
		}
		if r.Path != "" {
			recordSavepoint(&st, v1alpha1.SavepointInfo{Path: r.Path, Reason: d.Action.Reason, Time: now, Checkpoint: d.Action.Kind == CancelKeepingState && !r.Savepoint})
		}
		if d.Action.Kind != Cancel || st.Upgrade == nil || !st.Upgrade.Rollback {
			// What the job stopped at is now its newest state.
			st.ResumeFrom, st.LastCheckpoint = r.Path, nil
		}
		if st.Upgrade != nil {
			if !st.Upgrade.Rollback {
				st.Upgrade.RestorePath = r.Path
			}
			st.Upgrade.Phase = PhaseStarting
		} else if d.Action.Reason == "suspend" {
			dd := Decision{Status: st}
			suspended(o, &dd)
			st, events = dd.Status, append(events, dd.Events...)
		}
	case TriggerSavepoint:
		recordSavepoint(&st, v1alpha1.SavepointInfo{Path: r.Path, Reason: "manual", Time: now})
		st.SavepointTriggerNonce = o.Spec.SavepointTriggerNonce
		events = append(events, Event{Reason: "SavepointTaken", Message: "savepoint " + r.Path})
	}
	return st, events
}

func recordSavepoint(st *v1alpha1.WeirJobStatus, sp v1alpha1.SavepointInfo) {
	st.LastSavepoint = sp.DeepCopy()
	st.Savepoints = append(st.Savepoints, sp)
	if n := len(st.Savepoints) - maxSavepoints; n > 0 {
		st.Savepoints = st.Savepoints[n:]
	}
}

func setCondition(st *v1alpha1.WeirJobStatus, typ string, ok bool, reason, msg string, now time.Time) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now)})
}
