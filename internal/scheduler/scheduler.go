// Package scheduler is a job's lifecycle on the JobManager as a state
// machine, in the shape of the checkpoint coordinator: the driver feeds it
// events (slots offered, a subtask's state changed, a TaskManager lost, a
// restart timer due, cancel, loss of leadership) and carries out the
// effects it decides (deploy, cancel subtasks, start and stop checkpoints,
// arm a timer, persist the restart budget, end the job). It does no I/O and
// reads time only from its Clock, so every interleaving can be scripted.
//
// Failover follows Flink's region strategy: a failed subtask restarts only
// its pipelined region (the subtasks connected to it by data exchange)
// from the latest completed checkpoint; the other regions keep running and
// keep their attempts. A failure that concerns every region, or one that is
// not a subtask's (a checkpoint failure past the tolerable count), restarts
// the whole job, which then is RESTARTING rather than RUNNING.
package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/putback"
	"github.com/weirproject/weir/internal/restart"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Clock is the scheduler's only source of time.
type Clock interface{ Now() time.Time }

// Config is what a job's scheduler is built from.
type Config struct {
	JobID string
	// Session is unique to this leadership term's run of the job; attempt
	// IDs carry it so that a TaskManager tells two terms' attempts apart.
	Session  string
	Graph    *weirv1.JobGraph
	Strategy restart.Strategy
	// Restarts is the count a previous leader reached.
	Restarts int32
	// Adopt, when set, takes over the attempts a previous leader ran
	// instead of deploying the job.
	Adopt *Adoption
}

type phase int

const (
	// stopping: the regions' subtasks are being cancelled.
	stopping phase = iota
	// delaying: every one stopped; the restart strategy's delay runs.
	delaying
	// restoring: the driver finds the checkpoint to restart from.
	restoring
	// scheduling: the regions wait for slots to be redeployed.
	scheduling
	// adopting: a new leader waits for its TaskManagers to report the
	// attempts the previous leader ran (restart 0 only; see Adoption).
	adopting
)

func (p phase) String() string {
	return [...]string{"stopping", "delaying", "restoring", "scheduling", "adopting"}[p]
}

// pendingRestart is a failover in progress: a set of regions that go
// through stopping, delaying, restoring and scheduling together.
type pendingRestart struct {
	id      int64
	regions map[int]bool
	full    bool
	phase   phase
	delay   time.Duration
	due     time.Time
	// rescale is the graph a rescaling restart deploys; nil for a failover.
	rescale *weirv1.JobGraph
	// prefer is where a rescale would place each slot (statePlacement).
	prefer map[SlotKey]string
}

// Job is one job's lifecycle state machine.
type Job struct {
	cfg   Config
	clock Clock

	state    weirv1.JobState
	cause    string
	restarts int32
	start    time.Time
	end      time.Time
	regions  int

	execs []*Exec
	// restarts in progress by ID, and the restart each busy region is in.
	pending     map[int64]*pendingRestart
	busy        map[int]int64
	nextRestart int64
	// generation changes on every failure, so a final checkpoint the
	// driver is still retrying for an earlier generation stops.
	generation  int64
	checkpoints bool // the coordinator runs
	// finalFor is the generation a final checkpoint was asked for in.
	finalFor int64
	// finishing: since the coordinator last started, a checkpoint
	// completed that ends the subtasks (Finishing).
	finishing bool
	// adoptBy is the adoption's deadline; adopted: the next start of the
	// coordinator is the first since the job took over attempts.
	adoptBy     time.Time
	adoptWindow time.Duration
	adopted     bool
	// runningSeen are the attempts reported RUNNING, while the job
	// adopts, before a registration placed them; recordedOn the
	// TaskManager each recorded attempt was deployed to.
	runningSeen map[string]bool
	recordedOn  map[string]string
	exceptions  []Exception
	effects     []Effect
}

// New returns a job in CREATED, waiting for slots for every subtask; its
// first deployment is restart 0, which needs no delay or restore step (the
// driver already knows where the job starts from).
func New(cfg Config, clock Clock) (*Job, error) {
	order, err := jobgraph.TopologicalOrder(cfg.Graph)
	if err != nil {
		return nil, err
	}
	if cfg.Strategy == nil {
		cfg.Strategy = restart.New(nil, restart.Budget{}, clock.Now())
	}
	j := &Job{
		cfg: cfg, clock: clock, state: weirv1.JobState_JOB_STATE_CREATED, restarts: cfg.Restarts,
		pending: map[int64]*pendingRestart{}, busy: map[int]int64{}, finalFor: -1,
	}
	j.build(order, 0)
	first := &pendingRestart{id: 0, regions: j.allRegions(), full: true, phase: scheduling}
	j.pending[0] = first
	for r := range first.regions {
		j.busy[r] = 0
	}
	j.nextRestart = 1
	j.adoptFrom(cfg.Adopt)
	return j, nil
}

// build makes the subtasks of the graph's vertices (in topological order),
// not deployed yet, with their first attempt number.
func (j *Job) build(order []*weirv1.JobVertex, attempt int32) {
	regions := pipelinedRegions(order)
	j.execs, j.regions = nil, 0
	for _, v := range order {
		for i := range v.GetParallelism() {
			r := regions[subtask{v.GetName(), i}]
			j.regions = max(j.regions, r+1)
			j.execs = append(j.execs, &Exec{
				Attempt: &weirv1.ExecutionAttemptID{JobId: j.cfg.JobID, Vertex: v.GetName(), SubtaskIndex: i, Attempt: attempt, Session: j.cfg.Session},
				Vertex:  v, Source: len(v.GetInputs()) == 0, Region: r, Slot: slotKey(v, i),
				State: weirv1.ExecutionState_EXECUTION_STATE_CREATED,
			})
		}
	}
}

// UpdateCheckpointing records a new checkpointing configuration in the
// job's graph (and in the graph a rescale in progress deploys); false once
// the job ended.
func (j *Job) UpdateCheckpointing(cp *weirv1.CheckpointConfig) bool {
	if Terminal(j.state) {
		return false
	}
	with := func(g *weirv1.JobGraph) *weirv1.JobGraph {
		c := proto.Clone(g).(*weirv1.JobGraph)
		c.Checkpointing = proto.Clone(cp).(*weirv1.CheckpointConfig)
		return c
	}
	j.cfg.Graph = with(j.cfg.Graph)
	for _, r := range j.pending {
		if r.rescale != nil {
			r.rescale = with(r.rescale)
		}
	}
	return true
}

// Graph is the job graph the job runs, or is being rescaled to: the one
// to store, and to change further (a change based on the graph being
// left would undo the rescale).
func (j *Job) Graph() *weirv1.JobGraph {
	if putback.Active(putback.GraphBeforeRescale) {
		return j.cfg.Graph
	}
	for _, r := range j.pending {
		if r.rescale != nil {
			return r.rescale
		}
	}
	return j.cfg.Graph
}

// Ready returns and clears the effects decided since the last call.
func (j *Job) Ready() []Effect {
	out := j.effects
	j.effects = nil
	return out
}

func (j *Job) emit(e Effect) { j.effects = append(j.effects, e) }

// State is the job's state.
func (j *Job) State() weirv1.JobState { return j.state }

func (j *Job) allRegions() map[int]bool {
	all := make(map[int]bool, j.regions)
	for r := range j.regions {
		all[r] = true
	}
	return all
}

func (j *Job) transition(to weirv1.JobState) bool {
	if !CanTransition(j.state, to) {
		return false
	}
	from := j.state
	j.state = to
	if Terminal(to) {
		j.end = j.clock.Now()
	}
	j.emit(StateChanged{From: from, To: to})
	return true
}

// find is the current attempt a names; nil for an earlier attempt or
// another job's.
func (j *Job) find(a *weirv1.ExecutionAttemptID) *Exec {
	for _, e := range j.execs {
		if SameAttempt(e.Attempt, a) {
			return e
		}
	}
	return nil
}

// Holds reports whether a is the current attempt of its subtask, live and
// placed on taskManager. A TaskManager that reports running an attempt
// this is false for runs one nobody knows: it must be cancelled.
func (j *Job) Holds(a *weirv1.ExecutionAttemptID, taskManager string) bool {
	e := j.find(a)
	return e != nil && !e.Terminal() && e.TaskManager == taskManager
}

// NextSlotRequest says which new slots the oldest restart waiting for
// slots needs, one entry per slot: the TaskManager it would rather have
// the slot on, or "" for any; and whether one waits at all. Slots its
// subtasks share with subtasks that still run are held already and need
// none. SlotsOffered takes the slots in this order.
//
// A subtask restores fastest where its state is: a failover prefers the
// TaskManager the slot's subtasks ran on (local recovery finds their
// copies there), a rescale the one whose subtasks held most of the new
// subtasks' key groups.
func (j *Job) NextSlotRequest() (prefer []string, waiting bool) {
	r := j.scheduling()
	if r == nil {
		return nil, false
	}
	keys, order := j.placement(r)
	was := map[SlotKey]string{}
	for _, e := range j.execs {
		if r.regions[e.Region] && e.TaskManager != "" {
			was[e.Slot] = e.TaskManager
		}
	}
	prefer = []string{}
	for _, k := range order {
		if keys[k] != "" {
			continue
		}
		if tm, ok := r.prefer[k]; ok {
			prefer = append(prefer, tm)
		} else {
			prefer = append(prefer, was[k])
		}
	}
	return prefer, true
}

// MatchSlots picks a slot of free (one TaskManager ID per free slot, in
// the order to hand them out) for each entry of prefer (NextSlotRequest):
// on the TaskManager the entry names where that one has a slot free, else
// the next free slot; false when free has fewer slots than prefer asks.
func MatchSlots(free, prefer []string) ([]string, bool) {
	if len(free) < len(prefer) {
		return nil, false
	}
	// A preference takes its TaskManager's first free slot; the rest go
	// in free's order, which spreads them over the TaskManagers.
	rest := slices.Clone(free)
	out := make([]string, len(prefer))
	for i, tm := range prefer {
		if k := slices.Index(rest, tm); tm != "" && k >= 0 {
			out[i] = tm
			rest = slices.Delete(rest, k, k+1)
		}
	}
	next := 0
	for i := range out {
		if out[i] == "" {
			out[i] = rest[next]
			next++
		}
	}
	return out, true
}

// statePlacement is, for each slot of the job rebuilt at a new shape, the
// TaskManager whose subtasks held most of the key groups of the slot's
// keyed subtasks before the rescale (old, the subtasks then); for a slot
// with none, the TaskManager of the subtasks with its index. Keyed state
// is what a restore moves in bulk; other state is small.
func (j *Job) statePlacement(old []*Exec) map[SlotKey]string {
	maxP := int(j.cfg.Graph.GetMaxParallelism())
	keyed, byIndex := map[SlotKey]map[string]int{}, map[SlotKey]map[string]int{}
	add := func(m map[SlotKey]map[string]int, k SlotKey, tm string, n int) {
		if m[k] == nil {
			m[k] = map[string]int{}
		}
		m[k][tm] += n
	}
	for _, e := range j.execs {
		hashed := maxP > 0 && slices.ContainsFunc(e.Vertex.GetInputs(), func(in *weirv1.JobEdge) bool {
			return in.GetPartitioner() == weirv1.Partitioner_PARTITIONER_HASH
		})
		now := keygroup.RangeFor(maxP, int(e.Vertex.GetParallelism()), int(e.Attempt.GetSubtaskIndex()))
		for _, o := range old {
			if o.TaskManager == "" || o.Vertex.GetName() != e.Vertex.GetName() {
				continue
			}
			if o.Attempt.GetSubtaskIndex() == e.Attempt.GetSubtaskIndex() {
				add(byIndex, e.Slot, o.TaskManager, 1)
			}
			if hashed {
				was := keygroup.RangeFor(maxP, int(o.Vertex.GetParallelism()), int(o.Attempt.GetSubtaskIndex()))
				if n := now.Overlap(was); n > 0 {
					add(keyed, e.Slot, o.TaskManager, n)
				}
			}
		}
	}
	out := map[SlotKey]string{}
	for _, m := range []map[SlotKey]map[string]int{byIndex, keyed} {
		for k, by := range m {
			best, most := "", 0
			for tm, n := range by {
				if n > most || n == most && tm < best {
					best, most = tm, n
				}
			}
			out[k] = best // keyed state's choice overrides the index's
		}
	}
	return out
}

func (j *Job) scheduling() *pendingRestart {
	var oldest *pendingRestart
	for _, r := range j.pending {
		if r.phase == scheduling && (oldest == nil || r.id < oldest.id) {
			oldest = r
		}
	}
	return oldest
}

// placement maps each slot restart r's subtasks need to the TaskManager
// already holding it for a running subtask, or "" when it needs a new one;
// order lists the slots in a stable order.
func (j *Job) placement(r *pendingRestart) (map[SlotKey]string, []SlotKey) {
	keys := map[SlotKey]string{}
	var order []SlotKey
	for _, e := range j.execs {
		if r.regions[e.Region] {
			if _, ok := keys[e.Slot]; !ok {
				keys[e.Slot] = ""
				order = append(order, e.Slot)
			}
		}
	}
	for _, e := range j.execs {
		if !r.regions[e.Region] && !e.Terminal() && e.TaskManager != "" {
			if tm, ok := keys[e.Slot]; ok && tm == "" {
				keys[e.Slot] = e.TaskManager
			}
		}
	}
	sort.Slice(order, func(a, b int) bool {
		if order[a].Group != order[b].Group {
			return order[a].Group < order[b].Group
		}
		return order[a].Index < order[b].Index
	})
	return keys, order
}

// SlotsOffered deploys the oldest restart waiting for slots onto
// taskManagers, one entry per new slot NextSlotRequest asked for, in its
// order.
func (j *Job) SlotsOffered(taskManagers []string) error {
	r := j.scheduling()
	if r == nil {
		return fmt.Errorf("scheduler: job %s waits for no slots", j.cfg.JobID)
	}
	keys, order := j.placement(r)
	next := 0
	for _, k := range order {
		if keys[k] != "" {
			continue
		}
		if next >= len(taskManagers) {
			return fmt.Errorf("scheduler: job %s needs more than the %d slots offered", j.cfg.JobID, len(taskManagers))
		}
		keys[k] = taskManagers[next]
		next++
	}
	if next != len(taskManagers) {
		return fmt.Errorf("scheduler: job %s was offered %d slots but needs %d", j.cfg.JobID, len(taskManagers), next)
	}
	now := j.clock.Now()
	var deploy []Exec
	for i, e := range j.execs {
		if !r.regions[e.Region] {
			continue
		}
		attempt := e.Attempt.GetAttempt()
		if e.State != weirv1.ExecutionState_EXECUTION_STATE_CREATED {
			attempt++
		}
		a := &weirv1.ExecutionAttemptID{JobId: j.cfg.JobID, Vertex: e.Vertex.GetName(), SubtaskIndex: e.Attempt.GetSubtaskIndex(), Attempt: attempt, Session: j.cfg.Session}
		ne := &Exec{
			Attempt: a, Vertex: e.Vertex, Source: e.Source, Region: e.Region, Slot: e.Slot,
			TaskManager: keys[e.Slot], State: weirv1.ExecutionState_EXECUTION_STATE_SCHEDULED, Start: now,
		}
		j.execs[i] = ne
		deploy = append(deploy, *ne)
	}
	delete(j.pending, r.id)
	for reg := range r.regions {
		delete(j.busy, reg)
	}
	if r.full {
		j.transition(weirv1.JobState_JOB_STATE_RUNNING)
	}
	if j.start.IsZero() {
		j.start = now
	}
	j.emit(Deploy{Restart: r.id, Execs: deploy})
	return nil
}

// TaskStateChanged applies a state change a TaskManager reported (or the
// driver concluded: a deployment that failed, a cancel that could not
// reach the TaskManager). It reports whether a is a current attempt.
func (j *Job) TaskStateChanged(a *weirv1.ExecutionAttemptID, st weirv1.ExecutionState, cause string) bool {
	e := j.find(a)
	if e == nil {
		return false
	}
	if e.Terminal() {
		return true // a late report for an attempt already over
	}
	if j.Adopting() {
		if e.TaskManager != "" {
			_, known := j.Report(e.TaskManager, AttemptReport{Attempt: a, State: st, Cause: cause})
			return known
		}
		switch {
		case st.Terminal():
			// An end is a fact, whenever it is told: the attempt is not
			// adopted.
			e.State, e.Failure, e.End = st, cause, j.clock.Now()
			if j.adoptionSettled() {
				j.endAdoption("")
			}
		case st == weirv1.ExecutionState_EXECUTION_STATE_RUNNING:
			// Whether it runs is its TaskManager's registration's to say
			// (a RUNNING sent before the attempt ended may come after its
			// end); a registration that says it deploys was prepared
			// before this.
			j.runningSeen[a.Key()] = true
		}
		return true
	}
	if e.State == weirv1.ExecutionState_EXECUTION_STATE_CREATED && e.TaskManager == "" {
		return true // never placed here: a report of an attempt not adopted
	}
	e.State = st
	if cause != "" {
		e.Failure = cause
	}
	if e.Terminal() {
		e.End = j.clock.Now()
	}
	switch st {
	case weirv1.ExecutionState_EXECUTION_STATE_RUNNING:
		j.maybeStartCheckpoints()
	case weirv1.ExecutionState_EXECUTION_STATE_FINISHED:
		j.emit(TaskFinished{Attempt: e.Attempt})
		if (len(j.pending) > 0 || !j.checkpoints && !j.finishing) && !putback.Active(putback.FinishingRacesRegionRestart) {
			// It finished on a checkpoint taken before regions restarted:
			// see Finishing.
			j.escalate(fmt.Sprintf("subtask %s finished while regions restarted", e.Name()))
			j.settle()
			return true
		}
		if j.state == weirv1.JobState_JOB_STATE_RUNNING && len(j.pending) == 0 && j.all(weirv1.ExecutionState_EXECUTION_STATE_FINISHED) {
			j.finish(weirv1.JobState_JOB_STATE_FINISHED)
			return true
		}
	case weirv1.ExecutionState_EXECUTION_STATE_FAILED:
		if _, restarting := j.busy[e.Region]; !restarting {
			j.failure(map[int]bool{e.Region: true}, fmt.Sprintf("subtask %s failed: %s", e.Name(), cause), e.Name(), e.TaskManager, false)
		}
	case weirv1.ExecutionState_EXECUTION_STATE_CANCELED:
		// Nobody here asked for it (its region is not restarting and the
		// job is not being cancelled): its TaskManager shut down or lost
		// this JobManager. The subtask is gone all the same, so its region
		// fails over; ignoring it would leave the job waiting forever.
		if _, restarting := j.busy[e.Region]; !restarting && j.state == weirv1.JobState_JOB_STATE_RUNNING {
			if cause == "" {
				cause = "cancelled by its TaskManager"
			}
			j.failure(map[int]bool{e.Region: true}, fmt.Sprintf("subtask %s stopped: %s", e.Name(), cause), e.Name(), e.TaskManager, false)
		}
	}
	j.settle()
	return true
}

func (j *Job) all(st weirv1.ExecutionState) bool {
	for _, e := range j.execs {
		if e.State != st {
			return false
		}
	}
	return true
}

// maybeStartCheckpoints starts the coordinator once every subtask of a
// running job runs and no region is being restarted.
func (j *Job) maybeStartCheckpoints() {
	if j.checkpoints || j.state != weirv1.JobState_JOB_STATE_RUNNING || len(j.pending) > 0 ||
		!j.all(weirv1.ExecutionState_EXECUTION_STATE_RUNNING) {
		return
	}
	j.checkpoints = true
	j.finishing = false
	j.emit(StartCheckpoints{Tasks: j.copyExecs(), Soon: j.adopted})
	j.adopted = false
}

func (j *Job) stopCheckpoints(reason weirv1.CheckpointFailureReason) {
	j.checkpoints = false
	j.emit(StopCheckpoints{Reason: reason})
}

// TaskManagerLost fails every subtask that ran on taskManager, as one
// failure: the regions they belong to restart together and use one
// restart of the strategy's budget.
func (j *Job) TaskManagerLost(taskManager, cause string) {
	if j.adoptionLost(taskManager) {
		return
	}
	regions := map[int]bool{}
	var first *Exec
	for _, e := range j.execs {
		if e.TaskManager != taskManager || e.Terminal() {
			continue
		}
		e.State, e.Failure, e.End = weirv1.ExecutionState_EXECUTION_STATE_FAILED, cause, j.clock.Now()
		if _, restarting := j.busy[e.Region]; !restarting {
			regions[e.Region] = true
			if first == nil {
				first = e
			}
		}
	}
	if first != nil {
		j.failure(regions, fmt.Sprintf("subtask %s failed: %s", first.Name(), cause), first.Name(), taskManager, false)
	}
	j.settle()
}

// Fail is a failure of the job as a whole (a checkpoint failure beyond the
// tolerable count, a deployment that cannot be built): every region
// restarts.
func (j *Job) Fail(cause string) {
	j.notAdopted()
	j.failure(j.allRegions(), cause, "", "", true)
	j.settle()
}

// failure decides on a failure of regions: restart them (all of them,
// when they are every region or the failure is global) or fail the job.
// Only a RUNNING job restarts; a CREATED one fails for good (it never
// ran, so its failure is one of scheduling), and a job already restarting
// whole, failing or cancelling is stopping every subtask anyway.
func (j *Job) failure(regions map[int]bool, cause, task, tm string, global bool) {
	if j.state != weirv1.JobState_JOB_STATE_RUNNING && j.state != weirv1.JobState_JOB_STATE_CREATED {
		return
	}
	now := j.clock.Now()
	ex := Exception{Time: now, Task: task, TaskManager: tm, Cause: cause}
	j.generation++
	delay, ok := j.cfg.Strategy.Failure(now)
	if !ok || j.state == weirv1.JobState_JOB_STATE_CREATED {
		j.cause = cause
		if !ok {
			j.cause = fmt.Sprintf("%s (not restarted: %s)", cause, j.cfg.Strategy.Describe())
		}
		j.recordException(ex)
		j.failJob()
		return
	}
	j.cause = cause
	j.restarts++
	// Subtasks finish only after the job's final checkpoint; a region that
	// fails after some did cannot take another final checkpoint with them
	// gone, so everything restarts from the final one (its sinks committed
	// it already: committing again is a no-op).
	full := global || len(regions) == j.regions || j.anyFinished() ||
		j.finishing && !putback.Active(putback.FinishingRacesRegionRestart)
	r := &pendingRestart{id: j.nextRestart, regions: regions, full: full, delay: delay}
	j.nextRestart++
	if full {
		// A whole-job restart takes over the regions' restarts in progress.
		r.regions = j.allRegions()
		clear(j.pending)
		clear(j.busy)
		j.transition(weirv1.JobState_JOB_STATE_RESTARTING)
	}
	j.occupy(r)
	ex.Regions, ex.Full = sortedRegions(r.regions), full
	j.recordException(ex)
	j.stopCheckpoints(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_FAILOVER_REGION)
	j.emit(RestartStarted{Restart: r.id, Regions: ex.Regions, Full: full, Cause: cause, Delay: delay})
	j.emit(PersistStatus{Restarts: j.restarts, Budget: j.cfg.Strategy.Budget()})
	j.cancel(func(e *Exec) bool { return r.regions[e.Region] })
}

// Finishing records that a checkpoint completed which ends the subtasks
// (a bounded job's final checkpoint, a stop-with-savepoint): they finish
// once notified. That checkpoint covered the attempts the coordinator ran
// with. A region restarted since (its failure raced the completion) has
// attempts that are not among them and could only finish by taking
// another final checkpoint together with the subtasks that finish now,
// which will be gone: the job would wait forever. So the whole job
// restarts from the finishing checkpoint instead, as after a failure that
// follows a finish (its sinks committed it already: committing again is a
// no-op).
func (j *Job) Finishing() {
	if putback.Active(putback.FinishingRacesRegionRestart) {
		return
	}
	if j.checkpoints {
		j.finishing = true
		return
	}
	j.escalate("regions restarted while the job's final checkpoint completed")
	j.settle()
}

// escalate turns the region restarts in progress (or the regions not yet
// running again after one) into a restart of the whole job. It is no new
// failure: it uses no restart budget, and waits the longest delay of the
// restarts it takes over.
func (j *Job) escalate(cause string) {
	if j.state != weirv1.JobState_JOB_STATE_RUNNING {
		return // already restarting whole, or stopping every subtask
	}
	var delay time.Duration
	for _, p := range j.pending {
		delay = max(delay, p.delay)
	}
	j.generation++
	j.cause = cause
	r := &pendingRestart{id: j.nextRestart, regions: j.allRegions(), full: true, delay: delay}
	j.nextRestart++
	clear(j.pending)
	clear(j.busy)
	j.transition(weirv1.JobState_JOB_STATE_RESTARTING)
	j.occupy(r)
	regions := sortedRegions(r.regions)
	j.recordException(Exception{Time: j.clock.Now(), Cause: cause, Regions: regions, Full: true})
	if j.checkpoints {
		j.stopCheckpoints(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_FAILOVER_REGION)
	}
	j.emit(RestartStarted{Restart: r.id, Regions: regions, Full: true, Cause: cause, Delay: delay})
	j.cancel(func(*Exec) bool { return true })
}

// occupy records restart r as pending and its regions as busy with it.
func (j *Job) occupy(r *pendingRestart) {
	j.pending[r.id] = r
	for reg := range r.regions {
		j.busy[reg] = r.id
	}
}

func (j *Job) anyFinished() bool {
	for _, e := range j.execs {
		if e.State == weirv1.ExecutionState_EXECUTION_STATE_FINISHED {
			return true
		}
	}
	return false
}

func sortedRegions(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func (j *Job) recordException(ex Exception) {
	j.exceptions = append(j.exceptions, ex)
	if len(j.exceptions) > maxExceptions {
		j.exceptions = j.exceptions[len(j.exceptions)-maxExceptions:]
	}
}

// failJob fails the job for good: FAILING until every subtask stopped.
func (j *Job) failJob() {
	if !j.transition(weirv1.JobState_JOB_STATE_FAILING) {
		return
	}
	clear(j.pending)
	clear(j.busy)
	j.stopCheckpoints(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_FAILOVER_REGION)
	j.cancel(func(*Exec) bool { return true })
}

// cancel asks for every live subtask that match selects to be cancelled.
func (j *Job) cancel(match func(*Exec) bool) {
	var live []Exec
	for _, e := range j.execs {
		if !e.Terminal() && e.State != weirv1.ExecutionState_EXECUTION_STATE_CREATED && match(e) {
			live = append(live, *e)
		}
	}
	if len(live) > 0 {
		j.emit(CancelTasks{Execs: live})
	}
}

// settle moves on what waited for subtasks to stop: restarts whose
// regions stopped start their delay, and a failing or cancelling job whose
// subtasks all stopped ends.
func (j *Job) settle() {
	for _, id := range j.pendingIDs() {
		r := j.pending[id]
		if r.phase != stopping || !j.stopped(func(e *Exec) bool { return r.regions[e.Region] }) {
			continue
		}
		r.phase, r.due = delaying, j.clock.Now().Add(r.delay)
		j.emit(ArmTimer{Restart: r.id, At: r.due})
	}
	switch j.state {
	case weirv1.JobState_JOB_STATE_FAILING:
		if j.stopped(func(*Exec) bool { return true }) {
			j.finish(weirv1.JobState_JOB_STATE_FAILED)
		}
	case weirv1.JobState_JOB_STATE_CANCELLING:
		if j.stopped(func(*Exec) bool { return true }) {
			j.finish(weirv1.JobState_JOB_STATE_CANCELED)
		}
	}
}

func (j *Job) pendingIDs() []int64 {
	ids := make([]int64, 0, len(j.pending))
	for id := range j.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// stopped reports whether no subtask that match selects runs: each is
// terminal or was never deployed.
func (j *Job) stopped(match func(*Exec) bool) bool {
	for _, e := range j.execs {
		if match(e) && !e.Terminal() && e.State != weirv1.ExecutionState_EXECUTION_STATE_CREATED {
			return false
		}
	}
	return true
}

// RestartDue is the restart timer of restart id firing: the driver is to
// find the checkpoint the regions restart from.
func (j *Job) RestartDue(id int64) {
	r, ok := j.pending[id]
	if !ok || r.phase != delaying || j.clock.Now().Before(r.due) {
		return // superseded, cancelled, or early
	}
	r.phase = restoring
	j.emit(PrepareRestore{Restart: id, Full: r.full})
}

// RestoreReady is the driver's answer to PrepareRestore: the restart goes
// on to wait for slots, or, when no checkpoint could be read, the job
// fails for good.
func (j *Job) RestoreReady(id int64, err error) {
	r, ok := j.pending[id]
	if !ok || r.phase != restoring {
		return
	}
	if err != nil {
		j.cause = fmt.Sprintf("restart: %v", err)
		j.recordException(Exception{Time: j.clock.Now(), Cause: j.cause})
		j.failJob()
		j.settle()
		return
	}
	if r.rescale != nil {
		// Every subtask stopped: the job takes its new shape, with attempt
		// numbers that go on from the old ones.
		order, err := jobgraph.TopologicalOrder(r.rescale)
		if err != nil {
			j.cause = fmt.Sprintf("rescale: %v", err)
			j.failJob()
			j.settle()
			return
		}
		next := int32(0)
		for _, e := range j.execs {
			next = max(next, e.Attempt.GetAttempt()+1)
		}
		old := j.execs
		j.cfg.Graph = r.rescale
		j.build(order, next)
		r.prefer = j.statePlacement(old)
		clear(j.busy)
		r.regions = j.allRegions()
		j.occupy(r)
	}
	r.phase = scheduling
	j.emit(AwaitSlots{Restart: id})
}

// Rescale restarts the running job at the parallelism g gives its
// vertices: every subtask stops and the job redeploys at once from the
// latest completed checkpoint (the caller takes one first), without using
// the restart budget. g must be the job's graph with other parallelisms.
func (j *Job) Rescale(g *weirv1.JobGraph) error {
	if j.state != weirv1.JobState_JOB_STATE_RUNNING {
		return fmt.Errorf("scheduler: job %s is %s; only a RUNNING job can be rescaled", j.cfg.JobID, j.state.FlinkName())
	}
	if len(j.pending) > 0 {
		return fmt.Errorf("scheduler: job %s has regions restarting; rescale it once they run again", j.cfg.JobID)
	}
	if _, err := jobgraph.TopologicalOrder(g); err != nil {
		return fmt.Errorf("scheduler: rescale: %w", err)
	}
	j.generation++
	r := &pendingRestart{id: j.nextRestart, regions: j.allRegions(), full: true, rescale: g}
	j.nextRestart++
	j.occupy(r)
	j.transition(weirv1.JobState_JOB_STATE_RESTARTING)
	j.stopCheckpoints(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SUSPEND)
	j.emit(RestartStarted{Restart: r.id, Regions: sortedRegions(r.regions), Full: true, Cause: "rescale", Rescale: true})
	j.cancel(func(*Exec) bool { return true })
	j.settle()
	return nil
}

// EndOfInput records that a subtask received all its input. Once every
// subtask has, the job takes its final checkpoint now rather than at the
// next period: the sinks commit their last epoch and every subtask
// finishes after it. It reports whether a is a current, running attempt.
func (j *Job) EndOfInput(a *weirv1.ExecutionAttemptID) bool {
	e := j.find(a)
	if e == nil || e.Terminal() {
		return false
	}
	e.EndOfInput = true
	j.maybeFinalCheckpoint()
	return true
}

// maybeFinalCheckpoint asks for the final checkpoint once every subtask of
// the running job received all its input, once per generation.
func (j *Job) maybeFinalCheckpoint() {
	if j.finalFor == j.generation || j.state != weirv1.JobState_JOB_STATE_RUNNING || len(j.pending) > 0 {
		return
	}
	for _, x := range j.execs {
		if !x.EndOfInput {
			return
		}
	}
	j.finalFor = j.generation
	j.emit(FinalCheckpoint{Generation: j.generation})
}

// Generation changes with every failure; a final checkpoint asked for in
// an earlier generation is moot.
func (j *Job) Generation() int64 { return j.generation }

// Cancel cancels the job on a user's request.
func (j *Job) Cancel() error {
	j.notAdopted()
	if j.state == weirv1.JobState_JOB_STATE_CREATED && j.stopped(func(*Exec) bool { return true }) {
		clear(j.pending)
		clear(j.busy)
		j.finish(weirv1.JobState_JOB_STATE_CANCELED)
		return nil
	}
	if !CanTransition(j.state, weirv1.JobState_JOB_STATE_CANCELLING) {
		return fmt.Errorf("scheduler: job %s cannot go from %s to %s", j.cfg.JobID, j.state.FlinkName(), weirv1.JobState_JOB_STATE_CANCELLING.FlinkName())
	}
	j.transition(weirv1.JobState_JOB_STATE_CANCELLING)
	clear(j.pending)
	clear(j.busy)
	j.stopCheckpoints(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_NOT_RUNNING)
	j.cancel(func(*Exec) bool { return true })
	j.settle()
	return nil
}

// Suspend ends this JobManager's part in the job when it lost leadership:
// nothing is sent to TaskManagers any more (they cancel the subtasks
// themselves when they follow the new leader, which recovers the job).
func (j *Job) Suspend() {
	j.notAdopted()
	clear(j.pending)
	clear(j.busy)
	j.finish(weirv1.JobState_JOB_STATE_SUSPENDED)
}

func (j *Job) finish(st weirv1.JobState) {
	if !j.transition(st) {
		return
	}
	j.checkpoints = false
	j.emit(Terminated{State: st})
}
