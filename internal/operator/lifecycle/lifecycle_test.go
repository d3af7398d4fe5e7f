package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// jobManager is a model of a JobManager for the scenarios: jobs start
// RUNNING unless their spec's job text contains "fail" or is in failing
// (then FAILED) or contains "stuck" (then stay CREATED); a spec whose text
// contains "bad" is refused (it does not make a valid job); each running
// job completes a checkpoint per round. Checkpoints and savepoints of a job
// share its IDs, as the JobManager's do.
type jobManager struct {
	jobs    map[string]*modelJob
	next    int
	down    bool
	failNow ActionKind // the next action of this kind fails
	// failAfter: the next action of this kind takes effect, but its
	// answer is an error (a timeout after the job stopped).
	failAfter ActionKind
	failing   map[string]bool // job texts whose jobs fail
	noCkpt    bool            // jobs complete no checkpoint
	// statsLost: the JobManager reports no checkpoint of these jobs (a
	// new leader that recovered them, before their next checkpoint).
	statsLost map[string]bool
	// refuseNow: the next submission is refused (a claim the stopping job
	// still holds), starting nothing.
	refuseNow bool
	log       []string
	// onSubmit sees every new job's submission, with the job submitted
	// before it.
	onSubmit func(a Action, prev *modelJob)
	last     *modelJob
}

type modelJob struct {
	spec     string
	state    string
	from     string
	ckpt     int64
	savepts  int
	ckptPath string
	// newest is the path of its newest checkpoint or savepoint.
	newest string
}

// stoppedAt is where the job's state is: its newest checkpoint or savepoint,
// else what it started from.
func (j *modelJob) stoppedAt() string {
	if j.newest != "" {
		return j.newest
	}
	return j.from
}

func newJobManager() *jobManager {
	return &jobManager{jobs: map[string]*modelJob{}, failing: map[string]bool{}, statsLost: map[string]bool{}}
}

func (m *jobManager) tick() {
	for id, j := range m.jobs {
		if j.state == "RUNNING" && !m.noCkpt {
			j.ckpt++
			j.ckptPath = fmt.Sprintf("/ckpt/%s/chk-%d", id, j.ckpt)
			j.newest = j.ckptPath
		}
	}
}

func (m *jobManager) view(id string) *Job {
	j := m.jobs[id]
	if j == nil {
		return nil
	}
	v := &Job{State: j.state, StartedFrom: j.from}
	if j.ckpt > 0 && !m.statsLost[id] {
		v.LatestCheckpoint = &v1alpha1.CheckpointInfo{ID: j.ckpt, Path: j.newest}
	}
	return v
}

func (j *modelJob) savepoint(id string) string {
	j.ckpt++
	j.savepts++
	j.newest = fmt.Sprintf("/sp/%s-%d", id, j.savepts)
	return j.newest
}

func (m *jobManager) do(a Action, jobID string) Result {
	if m.failNow == a.Kind && a.Kind != None {
		m.failNow = None
		return Result{Err: errors.New("injected failure")}
	}
	r := m.apply(a, jobID)
	if m.failAfter == a.Kind && a.Kind != None {
		m.failAfter = None
		return Result{Err: errors.New("injected timeout after the action took effect")}
	}
	return r
}

func (m *jobManager) apply(a Action, jobID string) Result {
	j := m.jobs[jobID]
	switch a.Kind {
	case Submit:
		// As the JobManager: the ID is looked up first, then the spec
		// validated, then claims and the state to restore checked.
		if j := m.jobs[a.JobID]; a.JobID != "" && j != nil {
			if j.spec != a.Spec.Job.Spec || j.from != a.RestorePath {
				return Result{Exists: true, Err: errors.New("the job exists and runs another graph")}
			}
			return Result{JobID: a.JobID} // a retried submission
		}
		if strings.Contains(a.Spec.Job.Spec, "bad") {
			return Result{Refused: true, Err: errors.New("the job spec: invalid")}
		}
		if m.refuseNow {
			m.refuseNow = false
			return Result{Refused: true, Err: errors.New("a claim is held by a job that has not ended")}
		}
		m.next++
		id := a.JobID
		if id == "" {
			id = fmt.Sprintf("job-%d", m.next)
		}
		state := "RUNNING"
		switch {
		case strings.Contains(a.Spec.Job.Spec, "fail") || m.failing[a.Spec.Job.Spec]:
			state = "FAILED"
		case strings.Contains(a.Spec.Job.Spec, "stuck"):
			state = "CREATED"
		}
		if m.onSubmit != nil {
			m.onSubmit(a, m.last)
		}
		m.jobs[id] = &modelJob{spec: a.Spec.Job.Spec, state: state, from: a.RestorePath}
		m.last = m.jobs[id]
		m.log = append(m.log, fmt.Sprintf("submit %q from %q", a.Spec.Job.Spec, a.RestorePath))
		return Result{JobID: id}
	case StopWithSavepoint:
		j.state = "FINISHED"
		p := j.savepoint(jobID)
		m.log = append(m.log, "stop with savepoint "+p)
		return Result{Path: p}
	case CancelKeepingState:
		j.state = "CANCELED"
		m.log = append(m.log, "cancel keeping "+j.newest)
		if m.statsLost[jobID] {
			return Result{}
		}
		return Result{Path: j.newest, Savepoint: strings.HasPrefix(j.newest, "/sp/")}
	case Cancel:
		j.state = "CANCELED"
		m.log = append(m.log, "cancel")
		return Result{}
	case TriggerSavepoint:
		p := j.savepoint(jobID)
		m.log = append(m.log, "savepoint "+p)
		return Result{Path: p}
	}
	return Result{}
}

// world is a WeirJob, its JobManager and a clock, driven round by round
// as the reconciler drives them.
type world struct {
	t      *testing.T
	jm     *jobManager
	gen    int64
	spec   v1alpha1.WeirJobSpec
	status v1alpha1.WeirJobStatus
	now    time.Time
	events []Event
	last   Decision
	// loseWrite drops the next round's status write, as a conflict or a
	// crash after the action does.
	loseWrite bool
	// history describes each round, for failures.
	history []string
	// decided is the status the last round decided on.
	decided v1alpha1.WeirJobStatus
}

func (w *world) describe(d Decision, st v1alpha1.WeirJobStatus) string {
	short := func(s string) string {
		if len(s) > 6 {
			return s[:6]
		}
		return s
	}
	up := "-"
	if u := st.Upgrade; u != nil {
		up = fmt.Sprintf("%s/%d/rb=%t/from=%s", u.Phase, u.Target, u.Rollback, u.RestorePath)
	}
	last := ""
	if st.LastCheckpoint != nil {
		last = st.LastCheckpoint.Path
	}
	lost := ""
	if w.loseWrite {
		lost = " (write lost)"
	}
	act := string(d.Action.Kind)
	if d.Action.Kind == Submit {
		act += fmt.Sprintf("(%s from %q as %s)", d.Action.Spec.Job.Spec, d.Action.RestorePath, short(d.Action.JobID))
	}
	return fmt.Sprintf("[round %d gen %d spec %s: %s job=%s action=%s%s err=%q up=%s last=%s resume=%s subs=%d]", len(w.history), w.gen, w.spec.Job.Spec, st.LifecycleState, short(st.JobID), act, lost, st.Error, up, last, st.ResumeFrom, st.Submissions)
}

func newWorld(t *testing.T, mode v1alpha1.UpgradeMode, job string) *world {
	return &world{t: t, jm: newJobManager(), gen: 1, now: time.Unix(1e9, 0),
		spec: v1alpha1.WeirJobSpec{Job: v1alpha1.JobSource{Spec: job}, UpgradeMode: mode}}
}

func (w *world) change(f func(*v1alpha1.WeirJobSpec)) {
	f(&w.spec)
	w.gen++
}

// round is one reconcile: observe, decide, act, complete; then the
// invariants.
func (w *world) round() {
	w.t.Helper()
	w.jm.tick()
	o := Observation{Now: w.now, UID: "uid-1", Generation: w.gen, Spec: w.spec, Status: w.status, Reachable: !w.jm.down}
	if w.status.JobID != "" && !w.jm.down {
		o.Job = w.jm.view(w.status.JobID)
	}
	for n := w.status.Submissions; !w.jm.down; n++ {
		j := w.jm.view(JobIDAt(o.UID, n))
		if j == nil {
			break
		}
		o.Next, o.NextSeq = j, n
	}
	d := Decide(o)
	if a := d.Action; a.Kind == Submit && a.Reason == "upgrade" && d.Status.FailedSpecHash != "" && SpecHash(a.Spec) == d.Status.FailedSpecHash {
		w.t.Fatalf("the rolled-back spec %q was submitted again as an upgrade\nrounds:\n%s", a.Spec.Job.Spec, strings.Join(w.history, "\n"))
	}
	w.events = append(w.events, d.Events...)
	st := d.Status
	if d.Action.Kind != None {
		r := w.jm.do(d.Action, d.Status.JobID)
		var ev []Event
		st, ev = Complete(o, d, r)
		w.events = append(w.events, ev...)
	}
	w.history = append(w.history, w.describe(d, st))
	w.decided = st
	if !w.loseWrite {
		w.status = st
	}
	w.loseWrite = false
	w.last = d
	w.now = w.now.Add(time.Second)
	w.invariants()
}

func (w *world) invariants() {
	w.t.Helper()
	running := 0
	for _, j := range w.jm.jobs {
		if j.state == "RUNNING" || j.state == "CREATED" {
			running++
		}
	}
	if running > 1 {
		w.t.Fatalf("%d jobs of one WeirJob run at once: %v", running, w.jm.log)
	}
	// What this round decided, whether or not its write was lost.
	if running > 0 && w.decided.LifecycleState == v1alpha1.StateSuspended {
		w.t.Fatalf("suspended, but a job runs: %v\nrounds:\n%s", w.jm.log, strings.Join(w.history, "\n"))
	}
	if len(w.status.Savepoints) > maxSavepoints {
		w.t.Fatalf("savepoint history of %d", len(w.status.Savepoints))
	}
	if up := w.status.Upgrade; up != nil && up.Phase != PhaseStopping && up.Phase != PhaseStarting && up.Phase != PhaseVerifying {
		w.t.Fatalf("unknown phase %q", up.Phase)
	}
}

// until runs rounds until the lifecycle state is want, at most n.
func (w *world) until(want string, n int) {
	w.t.Helper()
	for range n {
		w.round()
		if w.status.LifecycleState == want && w.status.Upgrade == nil {
			return
		}
	}
	w.t.Fatalf("not %s after %d rounds: %s, upgrade %+v, error %q\nlog: %v", want, n, w.status.LifecycleState, w.status.Upgrade, w.status.Error, w.jm.log)
}

func (w *world) ready() bool {
	return meta.IsStatusConditionTrue(w.status.Conditions, CondReady)
}

func (w *world) current() *modelJob { return w.jm.jobs[w.status.JobID] }

func TestFirstDeploymentRunsAndIsStable(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.spec.InitialSavepointPath = "/sp/initial"
	w.until(v1alpha1.StateRunning, 5)
	if !w.ready() || w.current().from != "/sp/initial" || w.status.StableGeneration != 1 || w.status.StableSpec == "" {
		t.Fatalf("status %+v, job %+v", w.status, w.current())
	}
	w.round()
	if w.status.LastCheckpoint == nil || w.status.LastCheckpoint.ID == 0 {
		t.Fatalf("latest checkpoint not recorded: %+v", w.status.LastCheckpoint)
	}
}

func TestUpgradeModes(t *testing.T) {
	for _, tc := range []struct {
		mode     v1alpha1.UpgradeMode
		stop     string
		fromPref string // what the new job starts from
	}{
		{v1alpha1.UpgradeSavepoint, "stop with savepoint", "/sp/"},
		{v1alpha1.UpgradeLastState, "cancel keeping", "/ckpt/"},
		{v1alpha1.UpgradeStateless, "cancel", ""},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			w := newWorld(t, tc.mode, "v1")
			w.until(v1alpha1.StateRunning, 5)
			w.round()
			w.round()
			old := w.status.JobID
			w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
			w.round()
			if w.status.LifecycleState != v1alpha1.StateUpgrading || !meta.IsStatusConditionTrue(w.status.Conditions, CondUpgrading) {
				t.Fatalf("after the change: %s", w.status.LifecycleState)
			}
			if w.last.Deploy.Job.Spec != "v1" {
				t.Fatalf("while the old job stops, its cluster was given spec %q", w.last.Deploy.Job.Spec)
			}
			w.until(v1alpha1.StateRunning, 6)
			j := w.current()
			if w.status.JobID == old || j.spec != "v2" || !strings.HasPrefix(j.from, tc.fromPref) || (tc.fromPref == "" && j.from != "") {
				t.Fatalf("new job %+v (id %s, old %s), log %v", j, w.status.JobID, old, w.jm.log)
			}
			if !strings.Contains(strings.Join(w.jm.log, ";"), tc.stop) {
				t.Fatalf("stopped without %q: %v", tc.stop, w.jm.log)
			}
			if w.status.DeployedGeneration != 2 || w.status.StableGeneration != 2 || !w.ready() {
				t.Fatalf("status %+v", w.status)
			}
			if tc.mode != v1alpha1.UpgradeStateless && (w.status.LastSavepoint == nil || w.status.LastSavepoint.Reason != "upgrade") {
				t.Fatalf("upgrade's state not recorded: %+v", w.status.LastSavepoint)
			}
		})
	}
}

func TestNonceAndSuspendNeedNoUpgrade(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.until(v1alpha1.StateRunning, 5)
	id := w.status.JobID
	w.change(func(s *v1alpha1.WeirJobSpec) { s.SavepointTriggerNonce = 7 })
	w.round()
	if w.status.JobID != id || w.status.SavepointTriggerNonce != 7 || w.status.LastSavepoint == nil || w.status.LastSavepoint.Reason != "manual" {
		t.Fatalf("manual savepoint: %+v", w.status)
	}
	w.round()
	if n := len(w.status.Savepoints); n != 1 {
		t.Fatalf("%d savepoints for one nonce", n)
	}

	w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend = true })
	w.until(v1alpha1.StateSuspended, 3)
	if w.last.Suspended {
		// The savepoint is taken from running TaskManagers: they go
		// once the job stopped.
		t.Fatal("the TaskManagers were scaled to zero in the round that stops the job")
	}
	if w.status.JobID != "" || !strings.HasPrefix(w.status.ResumeFrom, "/sp/") || w.ready() {
		t.Fatalf("suspended: %+v", w.status)
	}
	from := w.status.ResumeFrom
	w.round()
	if !w.last.Suspended {
		t.Fatal("a suspended job's TaskManagers were not scaled to zero")
	}
	if len(w.jm.log) != 3 {
		t.Fatalf("a suspended job acted: %v", w.jm.log)
	}
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend = false })
	w.until(v1alpha1.StateRunning, 5)
	if w.current().from != from {
		t.Fatalf("resumed from %q, want %q", w.current().from, from)
	}
}

func TestFailedUpgradeRollsBack(t *testing.T) {
	for _, bad := range []string{"v2-fail", "v2-stuck"} {
		t.Run(bad, func(t *testing.T) {
			w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
			w.spec.Rollback = &v1alpha1.RollbackSpec{Enabled: true, Timeout: metav1.Duration{Duration: 5 * time.Second}}
			w.until(v1alpha1.StateRunning, 5)
			w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = bad })
			w.until(v1alpha1.StateRolledBack, 20)
			j := w.current()
			if j.spec != "v1" || !strings.HasPrefix(j.from, "/sp/") {
				t.Fatalf("rolled back to %+v; log %v", j, w.jm.log)
			}
			if w.status.FailedGeneration != 2 || w.status.DeployedGeneration != 1 || w.ready() {
				t.Fatalf("status %+v", w.status)
			}
			if c := meta.FindStatusCondition(w.status.Conditions, CondReady); c == nil || c.Reason != "RolledBack" {
				t.Fatalf("Ready condition %+v", c)
			}
			if !hasEvent(w.events, "RollingBack") || !hasEvent(w.events, "RolledBack") {
				t.Fatalf("events %+v", w.events)
			}
			// The failed generation is not tried again; a new one is.
			n := len(w.jm.log)
			w.round()
			w.round()
			if len(w.jm.log) != n {
				t.Fatalf("the rolled back generation was retried: %v", w.jm.log[n:])
			}
			w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v3" })
			w.until(v1alpha1.StateRunning, 6)
			if w.current().spec != "v3" || w.status.StableGeneration != 3 {
				t.Fatalf("after a fixed spec: %+v", w.status)
			}
		})
	}
}

func TestRollbackOff(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.spec.Rollback = &v1alpha1.RollbackSpec{Enabled: false}
	w.until(v1alpha1.StateRunning, 5)
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2-fail" })
	for range 6 {
		w.round()
	}
	if w.status.LifecycleState != v1alpha1.StateFailed || w.current().spec != "v2-fail" {
		t.Fatalf("state %s job %+v", w.status.LifecycleState, w.current())
	}
	// A fixed spec replaces the failed one, from the upgrade's savepoint.
	sp := w.status.ResumeFrom
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v3" })
	w.until(v1alpha1.StateRunning, 6)
	if w.current().spec != "v3" || w.current().from != sp || sp == "" {
		t.Fatalf("fixed job %+v, want from %q", w.current(), sp)
	}
}

func TestLostJobAndUnreachableJobManager(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.until(v1alpha1.StateRunning, 5)
	w.round()
	w.round()
	ck := w.status.LastCheckpoint.Path

	w.jm.down = true
	w.round()
	if w.ready() || w.last.Action.Kind != None {
		t.Fatalf("unreachable: ready %v, action %v", w.ready(), w.last.Action)
	}
	w.jm.down = false
	delete(w.jm.jobs, w.status.JobID) // a JobManager without its HA data
	w.until(v1alpha1.StateRunning, 5)
	if w.current().from == "" || !hasEvent(w.events, "JobLost") {
		t.Fatalf("lost job resubmitted from %q (last checkpoint %s)", w.current().from, ck)
	}
}

func TestFailedActionIsRetried(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.until(v1alpha1.StateRunning, 5)
	w.jm.failNow = StopWithSavepoint
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
	w.round()
	if w.status.Error == "" || w.status.Upgrade == nil || w.status.Upgrade.Phase != PhaseStopping {
		t.Fatalf("after a failed savepoint: %+v", w.status)
	}
	w.until(v1alpha1.StateRunning, 6)
	if w.status.Error != "" || w.current().spec != "v2" {
		t.Fatalf("status %+v", w.status)
	}
}

func TestUpgradeOfAFailedJobStartsFromItsLastCheckpoint(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.until(v1alpha1.StateRunning, 5)
	w.round()
	w.current().state = "FAILED"
	w.round()
	if w.status.LifecycleState != v1alpha1.StateFailed || w.ready() {
		t.Fatalf("a failed job: %s", w.status.LifecycleState)
	}
	ck := w.status.LastCheckpoint.Path
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
	w.until(v1alpha1.StateRunning, 6)
	if w.current().from != ck || !hasEvent(w.events, "UpgradeFromLastState") {
		t.Fatalf("upgraded from %q, want %q", w.current().from, ck)
	}
}

func hasEvent(evs []Event, reason string) bool {
	for _, e := range evs {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// A status write lost after a submission (a conflict with a stale read, a
// crash) must not start a second job: the retried submission names the
// same job ID.
func TestLostStatusWriteDoesNotSubmitTwice(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.until(v1alpha1.StateRunning, 5)
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
	w.round() // stop with savepoint
	w.loseWrite = true
	w.round() // submit; its status is lost
	if w.status.Upgrade == nil || w.status.Upgrade.Phase != PhaseStarting {
		t.Fatalf("the lost write was kept: %+v", w.status.Upgrade)
	}
	jobs := len(w.jm.jobs)
	w.until(v1alpha1.StateRunning, 5)
	if len(w.jm.jobs) != jobs {
		t.Fatalf("a second job was started: %v", w.jm.log)
	}
}

// A last-state upgrade of a job that completed no checkpoint since it
// started from a savepoint starts the new job from that savepoint, not
// empty.
func TestLastStateBeforeAnyCheckpointKeepsTheStartingState(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeLastState, "v1")
	w.spec.InitialSavepointPath = "/sp/initial"
	w.jm.noCkpt = true
	w.until(v1alpha1.StateRunning, 5)
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
	w.until(v1alpha1.StateRunning, 6)
	if w.current().spec != "v2" || w.current().from != "/sp/initial" {
		t.Fatalf("new job %+v, want it from /sp/initial; log %v", w.current(), w.jm.log)
	}
}

// lastStop is the path the model JobManager's last stop with a savepoint
// produced.
func (w *world) lastStop() string {
	for i := len(w.jm.log) - 1; i >= 0; i-- {
		if p, ok := strings.CutPrefix(w.jm.log[i], "stop with savepoint "); ok {
			return p
		}
	}
	w.t.Fatalf("no stop with a savepoint: %v", w.jm.log)
	return ""
}

// A stop that took effect but whose outcome the operator did not record
// (the status write was lost, or the answer timed out after the job had
// stopped) must not restart the job from an older state: the output
// committed up to the savepoint would be repeated.
func TestLostStopOutcomeRestoresTheStopsSavepoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(w *world)
	}{
		{"upgrade write lost", func(w *world) { w.loseWrite = true }},
		{"upgrade answer timed out", func(w *world) { w.jm.failAfter = StopWithSavepoint }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
			w.until(v1alpha1.StateRunning, 5)
			w.round()
			w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
			tc.lose(w)
			w.round() // the stop takes effect; the operator does not learn it
			sp := w.lastStop()
			w.until(v1alpha1.StateRunning, 6)
			if w.current().spec != "v2" || w.current().from != sp {
				t.Fatalf("new job %+v, want it from the stop's savepoint %s; log %v", w.current(), sp, w.jm.log)
			}
		})
	}
	t.Run("suspend write lost", func(t *testing.T) {
		w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
		w.until(v1alpha1.StateRunning, 5)
		w.round()
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend = true })
		w.loseWrite = true
		w.round()
		sp := w.lastStop()
		w.until(v1alpha1.StateSuspended, 3)
		if w.status.ResumeFrom != sp {
			t.Fatalf("suspended to resume from %q, want the stop's savepoint %s", w.status.ResumeFrom, sp)
		}
	})
}

// A spec changed after a submission whose status write was lost: the job
// that submission started runs the old target's spec, so it must not be
// taken for the new spec's.
func TestSpecChangeAfterALostSubmission(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.until(v1alpha1.StateRunning, 5)
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
	w.round() // stop v1 with a savepoint
	w.loseWrite = true
	w.round() // submit v2; the write is lost
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v3" })
	w.until(v1alpha1.StateRunning, 10)
	if w.current().spec != "v3" || w.status.StableGeneration != 3 || w.status.DeployedGeneration != 3 {
		t.Fatalf("job %+v, status %+v; log %v", w.current(), w.status, w.jm.log)
	}
	stable, _ := stableSpec(&w.status)
	if stable.Job.Spec != "v3" {
		t.Fatalf("stable spec %q", stable.Job.Spec)
	}
	// v3 starts from what v2's job stopped at, not from v1's savepoint.
	if sp := w.lastStop(); w.current().from != sp || !strings.Contains(sp, w.jm.jobIDOf("v2")) {
		t.Fatalf("v3 from %q; last stop %q; log %v", w.current().from, sp, w.jm.log)
	}
}

// A spec changed while the old job is still being stopped: the upgrade
// aims at the newest spec and records the generation it deployed.
func TestSpecChangeWhileStopping(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
	w.until(v1alpha1.StateRunning, 5)
	w.jm.failNow = StopWithSavepoint
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
	w.round()
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v3" })
	w.until(v1alpha1.StateRunning, 6)
	stable, _ := stableSpec(&w.status)
	if w.current().spec != "v3" || w.status.StableGeneration != 3 || w.status.DeployedGeneration != 3 || stable.Job.Spec != "v3" {
		t.Fatalf("job %+v, status %+v", w.current(), w.status)
	}
	if n := strings.Count(strings.Join(w.jm.log, ";"), "submit"); n != 2 {
		t.Fatalf("%d submissions: %v", n, w.jm.log)
	}
}

func (m *jobManager) jobIDOf(spec string) string {
	for id, j := range m.jobs {
		if j.spec == spec {
			return id
		}
	}
	return "<none>"
}

// An upgrade whose verification cannot end must give way: to a new spec
// when the rollback fails too, to a suspension when a first deployment
// fails, and to a new submission when the JobManager lost the new job.
func TestVerificationGivesWay(t *testing.T) {
	rollback := &v1alpha1.RollbackSpec{Enabled: true, Timeout: metav1.Duration{Duration: 5 * time.Second}}
	t.Run("rollback fails too, then a new spec", func(t *testing.T) {
		w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
		w.spec.Rollback = rollback
		w.until(v1alpha1.StateRunning, 5)
		w.jm.failing["v1"] = true // what it needed is gone
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2-fail" })
		for range 12 {
			w.round()
		}
		if w.status.LifecycleState != v1alpha1.StateFailed {
			t.Fatalf("after a failing rollback: %s; log %v", w.status.LifecycleState, w.jm.log)
		}
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v3" })
		w.until(v1alpha1.StateRunning, 6)
		if w.current().spec != "v3" || w.status.StableGeneration != 3 {
			t.Fatalf("job %+v; log %v", w.current(), w.jm.log)
		}
	})
	t.Run("a failing first deployment, then suspend", func(t *testing.T) {
		w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1-fail")
		w.spec.InitialSavepointPath = "/sp/initial"
		for range 4 {
			w.round()
		}
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend = true })
		w.until(v1alpha1.StateSuspended, 3)
		if w.status.ResumeFrom != "/sp/initial" {
			t.Fatalf("resumes from %q", w.status.ResumeFrom)
		}
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend, s.Job.Spec = false, "v2" })
		w.until(v1alpha1.StateRunning, 5)
		if w.current().spec != "v2" || w.current().from != "/sp/initial" {
			t.Fatalf("job %+v", w.current())
		}
	})
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("job lost, rollback %t", on), func(t *testing.T) {
			w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
			w.spec.Rollback = &v1alpha1.RollbackSpec{Enabled: on, Timeout: metav1.Duration{Duration: 5 * time.Second}}
			w.until(v1alpha1.StateRunning, 5)
			w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
			w.round() // stop
			w.round() // submit
			if w.status.Upgrade == nil || w.status.Upgrade.Phase != PhaseVerifying {
				t.Fatalf("not verifying: %+v", w.status.Upgrade)
			}
			sp := w.lastStop()
			delete(w.jm.jobs, w.status.JobID)
			w.until(v1alpha1.StateRunning, 4)
			if w.current().spec != "v2" || w.current().from != sp || !hasEvent(w.events, "JobLost") {
				t.Fatalf("job %+v, want v2 from %s; log %v", w.current(), sp, w.jm.log)
			}
		})
	}
	t.Run("a stuck job replaced in savepoint mode", func(t *testing.T) {
		w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
		w.spec.Rollback = &v1alpha1.RollbackSpec{Enabled: false, Timeout: metav1.Duration{Duration: 5 * time.Second}}
		w.until(v1alpha1.StateRunning, 5)
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2-stuck" })
		for range 10 {
			w.round()
		}
		sp := w.lastStop()
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v3" })
		w.until(v1alpha1.StateRunning, 12)
		if w.current().spec != "v3" || w.current().from != sp {
			t.Fatalf("job %+v, want v3 from %s; log %v", w.current(), sp, w.jm.log)
		}
	})
	t.Run("a stuck job suspended in savepoint mode", func(t *testing.T) {
		w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
		w.spec.Rollback = &v1alpha1.RollbackSpec{Enabled: false, Timeout: metav1.Duration{Duration: 5 * time.Second}}
		w.until(v1alpha1.StateRunning, 5)
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2-stuck" })
		for range 3 {
			w.round()
		}
		sp := w.lastStop()
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend = true })
		w.until(v1alpha1.StateSuspended, 12)
		if w.status.ResumeFrom != sp {
			t.Fatalf("resumes from %q, want %s; log %v", w.status.ResumeFrom, sp, w.jm.log)
		}
	})
}

// A submission refused for good (a spec that does not make a valid job)
// starts nothing: a fixed spec replaces it, and so does a suspension.
func TestRefusedSubmissionGivesWay(t *testing.T) {
	t.Run("a fixed spec", func(t *testing.T) {
		w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1")
		w.until(v1alpha1.StateRunning, 5)
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2-bad" })
		for range 4 {
			w.round()
		}
		sp := w.lastStop()
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v3" })
		w.until(v1alpha1.StateRunning, 4)
		if w.current().spec != "v3" || w.current().from != sp || w.status.StableGeneration != 3 {
			t.Fatalf("job %+v, want v3 from %s; status %+v", w.current(), sp, w.status)
		}
	})
	t.Run("a bad first deployment, suspended", func(t *testing.T) {
		w := newWorld(t, v1alpha1.UpgradeSavepoint, "v1-bad")
		w.spec.InitialSavepointPath = "/sp/initial"
		for range 3 {
			w.round()
		}
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend = true })
		w.until(v1alpha1.StateSuspended, 3)
		w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend, s.Job.Spec = false, "v2" })
		w.until(v1alpha1.StateRunning, 4)
		if w.current().spec != "v2" || w.current().from != "/sp/initial" {
			t.Fatalf("job %+v", w.current())
		}
	})
}

// A JobManager that reports no checkpoint of a job it recovered (a new
// leader, before the job's next checkpoint): stopping it keeping its
// state restores the checkpoint the operator recorded, not what the job
// first started from.
func TestNoCheckpointStatsAfterFailover(t *testing.T) {
	w := newWorld(t, v1alpha1.UpgradeLastState, "v1")
	w.spec.InitialSavepointPath = "/sp/initial"
	w.until(v1alpha1.StateRunning, 5)
	w.round()
	w.round()
	want := w.current().newest
	w.jm.statsLost[w.status.JobID], w.jm.noCkpt = true, true
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = "v2" })
	w.until(v1alpha1.StateRunning, 5)
	if w.current().spec != "v2" || w.current().from != want {
		t.Fatalf("v2 from %q, want %q; log %v", w.current().from, want, w.jm.log)
	}
}
