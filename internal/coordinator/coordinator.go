// Package coordinator is the JobManager's checkpoint coordinator, one per
// job. Coordinator is a pure state machine in the style of etcd's raft: the
// Driver feeds it events (trigger requests, acks, declines, ticks of an
// injected clock, results of I/O it asked for) and carries out the effects
// it returns (allocate an ID, send trigger RPCs, write metadata, notify
// tasks, discard state). It never does I/O, starts goroutines or reads the
// wall clock itself, so every rule is testable step by step.
package coordinator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/weirproject/weir/internal/putback"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Clock is the coordinator's only source of time.
type Clock interface {
	Now() time.Time
}

// ErrCheckpointFailed wraps every reason a checkpoint request failed.
var ErrCheckpointFailed = errors.New("coordinator: checkpoint failed")

// Failure is why a request or a pending checkpoint failed.
type Failure struct {
	Reason  weirv1.CheckpointFailureReason
	Message string
}

func (f *Failure) Error() string {
	if f.Message == "" {
		return fmt.Sprintf("%v: %s", ErrCheckpointFailed, f.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", ErrCheckpointFailed, f.Reason, f.Message)
}

func (f *Failure) Unwrap() error { return ErrCheckpointFailed }

// counted reports whether a reason counts towards tolerable failures
// (I/O, async snapshot, decline, expiry, finalize, as Flink counts them). Declines for
// transient task conditions (not ready, closing, subsumed, cancel barrier)
// and trigger failures do not count, as in Flink.
func counted(r weirv1.CheckpointFailureReason) bool {
	switch r {
	case weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_IO_EXCEPTION,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_FINALIZE_CHECKPOINT_FAILURE:
		return true
	}
	return false
}

// Config is a job's checkpointing configuration.
type Config struct {
	JobID    string
	Interval time.Duration // 0: no periodic checkpoints
	// IntervalDuringBacklog, when BacklogInterval is set, replaces Interval
	// while any source reports it is processing a backlog (Flink 1.19's
	// execution.checkpointing.interval-during-backlog): catching up goes
	// faster with fewer checkpoints. 0 means none during the backlog.
	IntervalDuringBacklog time.Duration
	BacklogInterval       bool
	Timeout               time.Duration
	MinPause              time.Duration
	MaxConcurrent         int
	Tolerable             int
	MaxParallelism        int
	Options               *weirv1.CheckpointOptions
	// HistorySize bounds the checkpoint history kept for the API.
	HistorySize int
	// OperatorCoordinators and MasterHooks say whether the preparation
	// chain has those steps; the driver carries them out.
	OperatorCoordinators bool
	MasterHooks          bool
	// AlignRescale makes a rescale's checkpoint aligned whatever the job's
	// setting: the job has a broadcast edge, whose in-flight records
	// cannot be split across a new parallelism (each consumer had its own
	// copy at its own place in the stream). Other in-flight records are
	// redistributed at the restore.
	AlignRescale bool
}

// Task is one subtask attempt of the current execution.
type Task struct {
	Attempt *weirv1.ExecutionAttemptID
	Source  bool
}

// RequestKind orders requests in the queue.
type RequestKind int

const (
	Periodic RequestKind = iota
	Manual
	Savepoint
	// SyncSavepoint is stop-with-savepoint: tasks stop after the savepoint
	// and finish once it completed.
	SyncSavepoint
	// FullCheckpoint is a manual checkpoint that references no file of an
	// earlier one, even on an incremental backend (Flink's FULL type).
	FullCheckpoint
	// RescaleCheckpoint is the manual checkpoint a rescale restores from:
	// aligned whatever the job's setting if Config.AlignRescale; and
	// periodic checkpoints pause from its request until the next Start
	// (the rescale's restart) or ResumePeriodic (a rescale refused), so
	// that no checkpoint completes after it.
	RescaleCheckpoint
)

type request struct {
	seq    int64
	kind   RequestKind
	forced bool
	target string
	// drain ends the sources before a synchronous savepoint (terminate
	// rather than suspend).
	drain bool
}

func (r *request) savepoint() bool { return r.kind == Savepoint || r.kind == SyncSavepoint }

// before orders the queue: savepoint > forced > manual > periodic > oldest.
func (r *request) before(o *request) bool {
	if r.savepoint() != o.savepoint() {
		return r.savepoint()
	}
	if r.forced != o.forced {
		return r.forced
	}
	if (r.kind == Periodic) != (o.kind == Periodic) {
		return r.kind != Periodic
	}
	return r.seq < o.seq
}

// queueCapacity is Flink's CheckpointRequestDecider queue size.
const queueCapacity = 1000

// phase is how far a pending checkpoint's preparation chain got.
type phase int

const (
	phaseLocation     phase = iota // waiting for its storage location
	phaseCoordinators              // operator coordinators snapshotting
	phaseHooks                     // master hooks snapshotting
	phaseTriggered                 // trigger RPCs sent; collecting acks
)

type pending struct {
	id          int64
	req         *request
	phase       phase
	coordStates []*weirv1.NamedState
	hookStates  []*weirv1.NamedState
	triggered   time.Time
	deadline    time.Time
	location    string
	notYetAcked map[string]*weirv1.ExecutionAttemptID
	acked       map[string]*weirv1.AcknowledgeCheckpointRequest
	endOfInput  int // acks taken after the subtask's end of input
	ackedTimes  map[string]time.Time
	lastAck     time.Time
	// finalizing: every task acked; acks, declines and the timeout no
	// longer apply. writing: its Finalize is in flight (see finalizeNext).
	finalizing bool
	writing    bool
}

// Coordinator is the checkpoint coordinator state machine.
type Coordinator struct {
	cfg   Config
	clock Clock
	rng   *rand.Rand

	running      bool
	tasks        []Task
	finished     map[string]bool
	nextPeriodic time.Time // zero: no periodic trigger scheduled
	queue        []*request
	preparing    *request
	pending      map[int64]*pending
	// latestID is the newest checkpoint ID this coordinator saw, to tell late
	// acks from foreign ones.
	latestID        int64
	lastCompletedID int64
	// kept are the attempts that acknowledged each of the newest
	// checkpoints whose files are kept (completed, or stored with an
	// outcome unknown): an ack of one of them that comes again names
	// those very files, which must not be discarded. keptOrder bounds it.
	kept           map[int64]map[string]bool
	keptOrder      []int64
	lastCompletion time.Time
	consecutive    int
	seq            int64
	effects        []Effect
	stats          *Stats

	// aligned: every checkpoint is aligned for now (Reconfiguration.Aligned).
	aligned bool
	// last is a request that must be the job's last checkpoint before a
	// restart or its end: a rescale's (the restart restores it) or a
	// stop-with-savepoint's (sinks commit on it, and a job resumed from it
	// must not find output of a newer checkpoint committed). From its
	// request until Start (the restart) or ResumePeriodic (the rescale
	// refused), no other request starts, and its completion aborts any
	// newer checkpoint.
	last *request

	// periodicPaused: a stop-with-savepoint stopped periodic checkpoints
	// until the next Start (Flink's stopCheckpointScheduler).
	periodicPaused bool
	// backlog holds the sources that report a backlog, by attempt key.
	backlog map[string]bool
	// final is the completion that ends the subtasks, while some have not
	// finished; nil otherwise.
	final *finalNotice
	// cleaning is the number of checkpoints whose files are still being
	// deleted; while more than max-concurrent are, nothing new starts, so
	// a slow storage cannot pile up deletions behind fast checkpoints.
	cleaning int
}

// finalNotice is a completion that ends the subtasks (a final checkpoint,
// a stop-with-savepoint). Each subtask waits for it to finish: one lost
// notification would leave the job running with no checkpoint able to
// start and nothing to fail over. So until every subtask finished it is
// sent again to those that did not, with a growing pause (a subtask that
// already had it ignores a second one).
type finalNotice struct {
	id, subsumed int64
	next         time.Time
	pause        time.Duration
}

// The pauses between the repeats of a final notification.
const (
	renotifyFirst = time.Second
	renotifyMax   = 30 * time.Second
)

// New returns a stopped coordinator. rng seeds the first trigger's delay.
func New(cfg Config, clock Clock, rng *rand.Rand) *Coordinator {
	if cfg.MaxConcurrent < 1 {
		cfg.MaxConcurrent = 1
	}
	if cfg.HistorySize <= 0 {
		cfg.HistorySize = 100
	}
	return &Coordinator{cfg: cfg, clock: clock, rng: rng, pending: map[int64]*pending{}, kept: map[int64]map[string]bool{}, stats: newStats(cfg.HistorySize)}
}

// Ready returns and clears the effects decided since the last call.
func (c *Coordinator) Ready() []Effect {
	e := c.effects
	c.effects = nil
	return e
}

func (c *Coordinator) emit(e Effect) { c.effects = append(c.effects, e) }

// NextDeadline is when Tick must next be called; zero if never. A
// checkpoint being finalized no longer expires, so its deadline does not
// count: once passed, it would make the driver's timer fire in a loop.
func (c *Coordinator) NextDeadline() time.Time {
	d := c.nextPeriodic
	if c.final != nil && (d.IsZero() || c.final.next.Before(d)) {
		d = c.final.next
	}
	for _, p := range c.pending {
		if p.finalizing {
			continue
		}
		if d.IsZero() || p.deadline.Before(d) {
			d = p.deadline
		}
	}
	return d
}

// Start activates the coordinator when the job turns RUNNING with tasks.
// The first periodic trigger comes after a random delay in
// [min_pause, interval] so that jobs started together spread their load.
func (c *Coordinator) Start(tasks []Task) { c.start(tasks, false) }

// StartSoon is Start with the first periodic checkpoint due after the
// minimum pause only, not at a random point of the interval: the subtasks
// of a job a new leader adopted have gone a while without a checkpoint.
func (c *Coordinator) StartSoon(tasks []Task) { c.start(tasks, true) }

func (c *Coordinator) start(tasks []Task, soon bool) {
	c.running = true
	c.periodicPaused = false
	c.last = nil
	c.tasks = tasks
	c.finished = map[string]bool{}
	c.final = nil
	// Reports of attempts that are gone no longer count; the subtasks
	// that stayed (a region failover) report again with every heartbeat.
	current := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		current[t.Attempt.Key()] = true
	}
	for k := range c.backlog {
		if !current[k] {
			delete(c.backlog, k)
		}
	}
	if interval := c.interval(); interval > 0 {
		lo, hi := c.cfg.MinPause, interval
		delay := lo
		if hi > lo && !soon {
			delay += time.Duration(c.rng.Int64N(int64(hi - lo + 1)))
		}
		c.nextPeriodic = c.clock.Now().Add(delay)
	}
}

// Stop deactivates the coordinator when the job leaves RUNNING: every
// pending and queued checkpoint is aborted. A checkpoint being finalized is
// left to Finalized: its metadata may already be in the completed store, so
// its files must not be discarded under it.
func (c *Coordinator) Stop(reason weirv1.CheckpointFailureReason) {
	c.running = false
	c.nextPeriodic = time.Time{}
	// The subtasks it would have finished are being stopped or restarted.
	c.final = nil
	f := &Failure{Reason: reason}
	for _, r := range c.queue {
		c.failRequest(r, 0, f)
	}
	c.queue = nil
	for _, id := range c.pendingIDs() {
		if p := c.pending[id]; !p.writing {
			c.abort(p, f)
		}
	}
	if r := c.preparing; r != nil {
		// Still waiting for its ID (a later step would have a pending
		// checkpoint, aborted above). Fail it now rather than when the ID
		// arrives: by then the job may run again, and the request would
		// silently run against the new execution.
		c.preparing = nil
		c.failRequest(r, 0, f)
	}
}

// Reconfiguration changes a coordinator's periodic checkpointing while it
// runs; a nil field keeps its value.
type Reconfiguration struct {
	// Interval 0 turns periodic checkpoints off.
	Interval *time.Duration
	// Timeout applies to checkpoints triggered from now on.
	Timeout  *time.Duration
	MinPause *time.Duration
	// IntervalDuringBacklog sets (and turns on) the interval during a
	// backlog.
	IntervalDuringBacklog *time.Duration
	// Aligned makes every checkpoint aligned whatever the job's setting,
	// until set false: the job has a broadcast edge and runs at a
	// parallelism the HA store does not hold yet, so a new leader would
	// restore its checkpoints at the stored one, where in-flight records
	// of a broadcast edge cannot go.
	Aligned *bool
}

// Reconfigure applies r. A new interval takes effect at once: the next
// periodic checkpoint is one new interval from now (or never, with 0), so
// shortening a long interval does not wait for the old period to end.
func (c *Coordinator) Reconfigure(r Reconfiguration) {
	if r.Aligned != nil {
		c.aligned = *r.Aligned
	}
	if r.Timeout != nil {
		c.cfg.Timeout = *r.Timeout
	}
	if r.MinPause != nil {
		c.cfg.MinPause = *r.MinPause
	}
	if r.Interval != nil || r.IntervalDuringBacklog != nil {
		before := c.interval()
		if r.Interval != nil {
			c.cfg.Interval = *r.Interval
		}
		if r.IntervalDuringBacklog != nil {
			c.cfg.IntervalDuringBacklog, c.cfg.BacklogInterval = *r.IntervalDuringBacklog, true
		}
		// The interval in effect changed, or was set again: either way the
		// next periodic checkpoint is one interval in effect from now.
		if c.interval() != before || r.Interval != nil && !c.inBacklog() {
			c.reschedule()
		}
	}
}

// interval is the periodic interval in effect: the backlog's while a
// source reports one.
func (c *Coordinator) interval() time.Duration {
	if c.cfg.BacklogInterval && c.inBacklog() {
		return c.cfg.IntervalDuringBacklog
	}
	return c.cfg.Interval
}

func (c *Coordinator) inBacklog() bool {
	for _, t := range c.tasks {
		if c.backlog[t.Attempt.Key()] {
			return true
		}
	}
	return false
}

// reschedule puts the next periodic checkpoint one interval in effect from
// now (none with interval 0): a new interval applies at once rather than
// after the old period.
func (c *Coordinator) reschedule() {
	c.nextPeriodic = time.Time{}
	if interval := c.interval(); c.running && !c.periodicPaused && interval > 0 {
		c.nextPeriodic = c.clock.Now().Add(interval)
	}
}

// SourceBacklog records whether source subtask a is processing a backlog,
// as its TaskManager last reported. When that changes the interval in
// effect, the periodic schedule follows at once.
func (c *Coordinator) SourceBacklog(a *weirv1.ExecutionAttemptID, backlog bool) {
	before := c.interval()
	key := a.Key()
	if backlog {
		if c.backlog == nil {
			c.backlog = map[string]bool{}
		}
		c.backlog[key] = true
	} else {
		delete(c.backlog, key)
	}
	if c.interval() != before {
		c.reschedule()
	}
}

// TaskFinished records that a subtask finished; checkpoints that still wait
// for it can no longer complete.
func (c *Coordinator) TaskFinished(a *weirv1.ExecutionAttemptID) {
	if c.finished != nil {
		c.finished[a.Key()] = true
	}
	if c.final != nil && len(c.unfinished()) == 0 {
		c.final = nil
	}
}

// unfinished lists the current subtasks that have not finished.
func (c *Coordinator) unfinished() []*weirv1.ExecutionAttemptID {
	var out []*weirv1.ExecutionAttemptID
	for _, t := range c.tasks {
		if !c.finished[t.Attempt.Key()] {
			out = append(out, t.Attempt)
		}
	}
	return out
}

// Trigger enqueues a checkpoint request and returns its number; the
// outcome arrives as a RequestDone effect with that number.
func (c *Coordinator) Trigger(kind RequestKind, forced bool, target string) int64 {
	r := &request{kind: kind, forced: forced, target: target}
	if kind == RescaleCheckpoint {
		c.nextPeriodic = time.Time{}
		c.periodicPaused = true
		c.takeLast(r)
	}
	return c.trigger(r)
}

// ResumePeriodic ends the pause of periodic checkpoints a rescale's
// checkpoint began, when the rescale did not go ahead.
func (c *Coordinator) ResumePeriodic() {
	if c.last != nil && c.last.kind == SyncSavepoint && !putback.Active(putback.CheckpointAfterRescale) {
		return // the pause is a stop-with-savepoint's, not the rescale's to end
	}
	c.periodicPaused = false
	c.last = nil
	c.reschedule()
}

// StopWithSavepoint requests a synchronous savepoint: periodic checkpoints
// pause until the next Start (a failed savepoint fails the job over, whose
// restart resumes them) and the tasks finish once it completed. drain ends
// the sources first.
func (c *Coordinator) StopWithSavepoint(target string, drain bool) int64 {
	c.nextPeriodic = time.Time{}
	c.periodicPaused = true
	r := &request{kind: SyncSavepoint, forced: true, target: target, drain: drain}
	c.takeLast(r)
	return c.trigger(r)
}

// takeLast makes r the job's last checkpoint (see Coordinator.last). A
// second such request while one is under way is refused in decide, as
// any other.
func (c *Coordinator) takeLast(r *request) {
	if c.last == nil && !putback.Active(putback.CheckpointAfterRescale) {
		c.last = r
	}
}

// lastRefusal is why a request cannot start while c.last is under way.
func (c *Coordinator) lastRefusal() *Failure {
	msg := "the job is being rescaled: its checkpoint is the last before the restart"
	if c.last.kind == SyncSavepoint {
		msg = "the job is being stopped with a savepoint: it is the last checkpoint before the job stops"
	}
	return &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SUSPEND, Message: msg}
}

func (c *Coordinator) trigger(r *request) int64 {
	c.seq++
	r.seq = c.seq
	c.enqueue(r)
	c.decide()
	return r.seq
}

func (c *Coordinator) enqueue(r *request) {
	i := sort.Search(len(c.queue), func(i int) bool { return r.before(c.queue[i]) })
	c.queue = append(c.queue, nil)
	copy(c.queue[i+1:], c.queue[i:])
	c.queue[i] = r
	if len(c.queue) > queueCapacity {
		last := c.queue[len(c.queue)-1]
		c.queue = c.queue[:len(c.queue)-1]
		c.failRequest(last, 0, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TOO_MANY_CHECKPOINT_REQUESTS})
	}
}

// Tick fires the periodic trigger and expires pending checkpoints.
func (c *Coordinator) Tick() {
	now := c.clock.Now()
	if f := c.final; f != nil && !now.Before(f.next) {
		f.pause = min(2*f.pause, renotifyMax)
		f.next = now.Add(f.pause)
		c.emit(NotifyComplete{ID: f.id, LastSubsumed: f.subsumed, Final: true, Repeat: true, Tasks: c.unfinished()})
	}
	for _, id := range c.pendingIDs() {
		if p := c.pending[id]; !p.finalizing && !now.Before(p.deadline) {
			c.abort(p, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED})
		}
	}
	if c.running && !c.nextPeriodic.IsZero() && !now.Before(c.nextPeriodic) {
		// Fixed rate: missed periods are skipped, not caught up.
		for !now.Before(c.nextPeriodic) {
			c.nextPeriodic = c.nextPeriodic.Add(c.interval())
		}
		c.seq++
		c.enqueue(&request{seq: c.seq, kind: Periodic})
	}
	c.decide()
}

// decide runs the head of the queue if the rules allow it.
func (c *Coordinator) decide() {
	for c.preparing == nil && len(c.queue) > 0 {
		head := c.queue[0]
		if !c.running {
			c.queue = c.queue[1:]
			c.failRequest(head, 0, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_NOT_RUNNING})
			continue
		}
		if head.kind == Periodic && c.periodicPaused {
			// Queued before a stop-with-savepoint: it must neither run next
			// to it nor re-arm the paused timer through the min pause.
			c.queue = c.queue[1:]
			c.failRequest(head, 0, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_PERIODIC_SCHEDULER_SHUTDOWN})
			continue
		}
		if c.last != nil && head != c.last {
			c.queue = c.queue[1:]
			c.failRequest(head, 0, c.lastRefusal())
			continue
		}
		if c.cleaning > c.cfg.MaxConcurrent {
			return // CleanupsInProgress runs decide again
		}
		if len(c.pending) >= c.cfg.MaxConcurrent && !head.forced {
			return // the next completion or abort runs decide again
		}
		now := c.clock.Now()
		if head.kind == Periodic && !head.forced && !c.lastCompletion.IsZero() && now.Sub(c.lastCompletion) < c.cfg.MinPause {
			c.queue = c.queue[1:]
			c.failRequest(head, 0, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_MINIMUM_TIME_BETWEEN_CHECKPOINTS})
			// Fire again exactly when the pause is over.
			c.nextPeriodic = c.lastCompletion.Add(c.cfg.MinPause)
			continue
		}
		c.queue = c.queue[1:]
		if a := c.notRunning(); a != nil {
			c.failRequest(head, 0, &Failure{
				Reason:  weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_NOT_ALL_REQUIRED_TASKS_RUNNING,
				Message: fmt.Sprintf("subtask %s is not running", a.Key()),
			})
			continue
		}
		c.preparing = head
		c.emit(AllocateID{Request: head.seq})
	}
}

// IDAllocated delivers the checkpoint ID the driver took from the counter
// for request req. The pending checkpoint exists, with its timeout armed,
// from here on; the chain continues with its storage location.
func (c *Coordinator) IDAllocated(req, id int64, err error) {
	r := c.preparing
	if r == nil || r.seq != req {
		return // the request was already failed (the job stopped)
	}
	if id > c.latestID {
		c.latestID = id
	}
	switch {
	case err != nil:
		// A trigger that could not start (etcd slow or changing members)
		// does not count towards the tolerable failures, as in Flink's
		// CheckpointFailureManager: no task did any work for it, and a
		// failover would not make the next one likelier to start.
		c.preparing = nil
		c.failRequest(r, 0, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE, Message: err.Error()})
		c.decide()
		return
	case !c.running:
		c.preparing = nil
		c.failRequest(r, 0, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_NOT_RUNNING})
		c.decide()
		return
	}
	now := c.clock.Now()
	p := &pending{
		id: id, req: r, phase: phaseLocation, triggered: now, deadline: now.Add(c.cfg.Timeout),
		notYetAcked: map[string]*weirv1.ExecutionAttemptID{},
		acked:       map[string]*weirv1.AcknowledgeCheckpointRequest{},
		ackedTimes:  map[string]time.Time{},
	}
	for _, t := range c.tasks {
		p.notYetAcked[t.Attempt.Key()] = t.Attempt
	}
	c.pending[id] = p
	typ := weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT
	switch {
	case r.kind == SyncSavepoint && r.drain:
		typ = weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE
	case r.kind == SyncSavepoint:
		typ = weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND
	case r.savepoint():
		typ = weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT
	}
	attempts := make([]*weirv1.ExecutionAttemptID, len(c.tasks))
	for i, t := range c.tasks {
		attempts[i] = t.Attempt
	}
	c.stats.started(id, typ, now, attempts)
	c.emit(InitLocation{ID: id, Savepoint: r.savepoint(), Target: r.target})
}

// preparingStep returns the pending checkpoint a chain step's result is for,
// if it is still at that step. A checkpoint aborted meanwhile (expired, job
// stopped) is gone: whatever the step made must be released.
func (c *Coordinator) preparingStep(id int64, at phase) *pending {
	if p := c.pending[id]; p != nil && p.phase == at {
		return p
	}
	return nil
}

// SnapshottingCoordinators reports whether checkpoint id is waiting for
// its operator coordinators' snapshots (not aborted meanwhile).
func (c *Coordinator) SnapshottingCoordinators(id int64) bool {
	return c.preparingStep(id, phaseCoordinators) != nil
}

// LocationReady delivers the storage location of checkpoint id.
func (c *Coordinator) LocationReady(id int64, location string, err error) {
	p := c.preparingStep(id, phaseLocation)
	if p == nil {
		if location != "" {
			c.emit(DiscardState{Location: location})
		}
		return
	}
	if err != nil {
		// Not counted either, like a failed ID allocation: the trigger
		// never reached a task.
		c.abort(p, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE, Message: err.Error()})
		c.decide()
		return
	}
	p.location = location
	c.snapshotCoordinators(p)
}

func (c *Coordinator) snapshotCoordinators(p *pending) {
	if c.cfg.OperatorCoordinators {
		p.phase = phaseCoordinators
		c.emit(SnapshotOperatorCoordinators{ID: p.id})
		return
	}
	c.snapshotHooks(p)
}

// CoordinatorsSnapshotted delivers the operator coordinators' states. Their
// events to tasks stay held back until the trigger RPCs went out.
func (c *Coordinator) CoordinatorsSnapshotted(id int64, states []*weirv1.NamedState, err error) {
	p := c.preparingStep(id, phaseCoordinators)
	if p == nil {
		return
	}
	if err != nil {
		c.abort(p, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE, Message: "operator coordinator: " + err.Error()})
		c.decide()
		return
	}
	p.coordStates = states
	c.snapshotHooks(p)
}

func (c *Coordinator) snapshotHooks(p *pending) {
	if c.cfg.MasterHooks {
		p.phase = phaseHooks
		c.emit(SnapshotMasterHooks{ID: p.id, Timestamp: p.triggered})
		return
	}
	c.sendTrigger(p)
}

// MasterHooksDone delivers the master hooks' states.
func (c *Coordinator) MasterHooksDone(id int64, states []*weirv1.NamedState, err error) {
	p := c.preparingStep(id, phaseHooks)
	if p == nil {
		return
	}
	if err != nil {
		c.abort(p, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE, Message: "master hook: " + err.Error()})
		c.decide()
		return
	}
	p.hookStates = states
	c.sendTrigger(p)
}

// sendTrigger ends the preparation chain: the sources are triggered and the
// next request may be prepared.
func (c *Coordinator) sendTrigger(p *pending) {
	p.phase = phaseTriggered
	r := p.req
	if c.preparing == r {
		c.preparing = nil
	}
	opts := &weirv1.CheckpointOptions{
		Type:                       weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT,
		ExactlyOnce:                c.cfg.Options.GetExactlyOnce(),
		Unaligned:                  c.cfg.Options.GetUnaligned(),
		AlignedCheckpointTimeoutMs: c.cfg.Options.GetAlignedCheckpointTimeoutMs(),
		Incremental:                c.cfg.Options.GetIncremental(),
	}
	if r.kind == FullCheckpoint {
		opts.Type = weirv1.CheckpointType_CHECKPOINT_TYPE_FULL_CHECKPOINT
	}
	if c.aligned && !putback.Active(putback.UnalignedWhileUnstored) || r.kind == RescaleCheckpoint && c.cfg.AlignRescale {
		opts.Unaligned, opts.AlignedCheckpointTimeoutMs = false, 0
	}
	if r.savepoint() {
		// Savepoints are self-contained and portable: aligned, full.
		opts = &weirv1.CheckpointOptions{
			Type: weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, ExactlyOnce: true, TargetLocation: p.location,
		}
		if r.kind == SyncSavepoint {
			opts.Type = weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND
			if r.drain {
				opts.Type = weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE
			}
		}
	}
	var trigger []*weirv1.ExecutionAttemptID
	for _, t := range c.tasks {
		if t.Source {
			trigger = append(trigger, t.Attempt)
		}
	}
	c.emit(SendTrigger{ID: p.id, Timestamp: p.triggered, Options: opts, Tasks: trigger, ReleaseCoordinatorEvents: c.cfg.OperatorCoordinators})
	c.decide()
}

// Restored records that the job started from checkpoint id at path.
func (c *Coordinator) Restored(id int64, path string, savepoint bool) {
	if id > c.latestID {
		c.latestID = id
	}
	c.stats.restored(id, path, savepoint, c.clock.Now())
}

// AckResult is the outcome of an acknowledgement, as in Flink.
type AckResult int

const (
	AckSuccess AckResult = iota
	AckDuplicate
	AckUnknown
	AckDiscarded
)

func (r AckResult) String() string {
	return [...]string{"SUCCESS", "DUPLICATE", "UNKNOWN", "DISCARDED"}[r]
}

// Acknowledge records a subtask's ack. State of an ack that cannot be used
// (unknown attempt, checkpoint gone) is discarded, never leaked.
func (c *Coordinator) Acknowledge(ack *weirv1.AcknowledgeCheckpointRequest) AckResult {
	p := c.pending[ack.GetCheckpointId()]
	if p == nil {
		if c.Kept(ack) {
			return AckDuplicate // its state is the kept checkpoint's
		}
		if ack.GetState() != nil {
			c.emit(DiscardState{States: []*weirv1.SubtaskState{ack.GetState()}})
		}
		if ack.GetCheckpointId() <= c.latestID {
			return AckDiscarded
		}
		return AckUnknown
	}
	key := ack.GetAttempt().Key()
	if _, ok := p.acked[key]; ok {
		return AckDuplicate
	}
	if _, ok := p.notYetAcked[key]; !ok || p.finalizing || p.phase != phaseTriggered {
		if ack.GetState() != nil {
			c.emit(DiscardState{States: []*weirv1.SubtaskState{ack.GetState()}})
		}
		return AckUnknown
	}
	now := c.clock.Now()
	delete(p.notYetAcked, key)
	p.acked[key] = ack
	if ack.GetEndOfInput() {
		p.endOfInput++
	}
	p.ackedTimes[key] = now
	p.lastAck = now
	c.stats.acked(p.id, now, ack)
	if len(p.notYetAcked) == 0 {
		p.finalizing = true
		c.finalizeNext()
	}
	return AckSuccess
}

// finalizeNext starts writing the oldest fully acknowledged checkpoint once
// no other is being written. Completions thus reach the completed store in
// ID order: an older checkpoint finalized concurrently could otherwise land
// after a newer one and subsume it, although tasks were told the newer one
// completed.
func (c *Coordinator) finalizeNext() {
	var next *pending
	for _, id := range c.pendingIDs() {
		p := c.pending[id]
		if p.writing {
			return
		}
		if p.finalizing && next == nil {
			next = p
		}
	}
	if next != nil {
		next.writing = true
		c.emit(Finalize{ID: next.id, Location: next.location, Savepoint: next.req.savepoint(),
			Synchronous: next.req.kind == SyncSavepoint, Metadata: c.metadata(next)})
	}
}

func (c *Coordinator) metadata(p *pending) *weirv1.CheckpointMetadata {
	md := &weirv1.CheckpointMetadata{
		JobId: c.cfg.JobID, CheckpointId: p.id, TriggerTimestampMs: p.triggered.UnixMilli(),
		CompletionTimestampMs: c.clock.Now().UnixMilli(), MaxParallelism: int32(c.cfg.MaxParallelism),
		Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT,
	}
	if p.req.savepoint() {
		md.Type = weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT
	}
	md.OperatorCoordinators, md.MasterStates = p.coordStates, p.hookStates
	keys := make([]string, 0, len(p.acked))
	for k := range p.acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if st := p.acked[k].GetState(); st != nil {
			md.Subtasks = append(md.Subtasks, st)
		}
	}
	return md
}

// Decline aborts the checkpoint a subtask could not take.
func (c *Coordinator) Decline(d *weirv1.DeclineCheckpointRequest) {
	p := c.pending[d.GetCheckpointId()]
	if p == nil || p.finalizing {
		return
	}
	if _, ok := p.notYetAcked[d.GetAttempt().Key()]; !ok {
		return // a foreign or already-acked attempt cannot veto the checkpoint
	}
	reason := d.GetReason()
	if reason == weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_UNSPECIFIED {
		reason = weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED
	}
	c.stats.declined(p.id, d)
	c.abort(p, &Failure{Reason: reason, Message: fmt.Sprintf("declined by %s: %s", d.GetAttempt().Key(), d.GetMessage())})
	c.decide()
}

// TriggerFailed aborts a checkpoint whose trigger RPC could not be sent.
func (c *Coordinator) TriggerFailed(id int64, err error) {
	if p := c.pending[id]; p != nil && !p.finalizing {
		c.abort(p, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE, Message: err.Error()})
		c.decide()
	}
}

// Finalized reports the outcome of a Finalize effect: the metadata was
// written and the checkpoint added to the completed store (subsumed is the
// newest checkpoint the store dropped, 0 if none).
func (c *Coordinator) Finalized(id int64, path string, subsumed int64, err error) {
	p := c.pending[id]
	if p == nil || !p.writing {
		return
	}
	if err != nil {
		c.abort(p, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_FINALIZE_CHECKPOINT_FAILURE, Message: err.Error()})
		c.finalizeNext()
		c.decide()
		return
	}
	now := c.clock.Now()
	delete(c.pending, id)
	c.keep(p)
	c.lastCompletion = now
	// A synchronous savepoint is a restore point like a checkpoint: sinks
	// commit on it and it enters the completed store.
	restorePoint := p.req.kind != Savepoint
	if restorePoint {
		c.lastCompletedID = max(c.lastCompletedID, id)
	}
	c.consecutive = 0
	c.stats.completed(id, now, path)
	c.emit(RequestDone{Request: p.req.seq, ID: id, Path: path})
	// Older pending checkpoints can no longer be useful, even fully
	// acknowledged ones waiting to be written. A savepoint is not in the
	// completed store, so it subsumes nothing (as in Flink).
	for _, older := range c.pendingIDs() {
		if q := c.pending[older]; restorePoint && older < id && !q.writing && !q.req.savepoint() {
			c.abort(q, &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_SUBSUMED})
		}
	}
	// The job's last checkpoint: any newer one, even fully acknowledged
	// and waiting to be written behind it, goes.
	if p.req == c.last {
		for _, newer := range c.pendingIDs() {
			if q := c.pending[newer]; newer > id && !q.writing {
				c.abort(q, c.lastRefusal())
			}
		}
	}
	// A savepoint commits no side effects: sinks commit with the next
	// checkpoint, so recovery never goes back behind committed output. A
	// synchronous savepoint is the job's last snapshot and must commit.
	if p.req.kind != Savepoint {
		var tasks []*weirv1.ExecutionAttemptID
		for _, t := range c.tasks {
			tasks = append(tasks, t.Attempt)
		}
		final := p.req.kind == SyncSavepoint || p.endOfInput == len(p.acked)
		c.emit(NotifyComplete{ID: id, LastSubsumed: subsumed, Final: final, Tasks: tasks})
		if final && c.running && len(c.unfinished()) > 0 && !putback.Active(putback.FinalNotifyOnce) {
			c.final = &finalNotice{id: id, subsumed: subsumed, next: now.Add(renotifyFirst), pause: renotifyFirst}
		}
	}
	c.finalizeNext()
	c.decide()
}

// FinalizeOutcomeUnknown reports a Finalize whose store write may or may
// not have been applied (the store timed out). The checkpoint may be the
// newest one in the store, and the store may have dropped older ones, so
// none of its files may go and no sink may roll its transaction back: the
// job fails over, and its recovery reads what the store really holds.
func (c *Coordinator) FinalizeOutcomeUnknown(id int64, err error) {
	p := c.pending[id]
	if p == nil || !p.writing {
		return
	}
	delete(c.pending, id)
	c.keep(p)
	f := &Failure{Reason: weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_FINALIZE_CHECKPOINT_FAILURE,
		Message: "outcome unknown, its files are kept: " + err.Error()}
	c.stats.failed(id, p.req.savepoint(), c.clock.Now(), f)
	c.emit(RequestDone{Request: p.req.seq, ID: id, Err: f})
	if c.running {
		c.emit(FailJob{Cause: fmt.Errorf("coordinator: checkpoint %d: %w", id, f)})
	}
	c.finalizeNext()
	c.decide()
}

// maxKept bounds the checkpoints whose acks are remembered: an ack comes
// again within moments (a retried call), not a hundred checkpoints later.
const maxKept = 100

// Kept reports whether ack comes again for a checkpoint whose files are
// kept (completed, or stored with an outcome unknown) from an attempt
// that acknowledged it: its state names that checkpoint's files.
func (c *Coordinator) Kept(ack *weirv1.AcknowledgeCheckpointRequest) bool {
	return c.kept[ack.GetCheckpointId()][ack.GetAttempt().Key()] && !putback.Active(putback.DuplicateAckDiscards)
}

// keep remembers who acknowledged p, whose files are kept.
func (c *Coordinator) keep(p *pending) {
	keys := make(map[string]bool, len(p.acked))
	for k := range p.acked {
		keys[k] = true
	}
	c.kept[p.id] = keys
	c.keptOrder = append(c.keptOrder, p.id)
	if len(c.keptOrder) > maxKept {
		delete(c.kept, c.keptOrder[0])
		c.keptOrder = c.keptOrder[1:]
	}
}

// CleanupsInProgress reports how many checkpoints' files are still being
// deleted.
func (c *Coordinator) CleanupsInProgress(n int) {
	c.cleaning = n
	c.decide()
}

// abort ends a pending checkpoint: its files go, tasks roll back.
func (c *Coordinator) abort(p *pending, f *Failure) {
	delete(c.pending, p.id)
	if c.preparing == p.req {
		// Aborted mid-chain: the next request may be prepared now, and the
		// chain's remaining results find the checkpoint gone.
		c.preparing = nil
	}
	var tasks []*weirv1.ExecutionAttemptID
	for _, t := range c.tasks {
		tasks = append(tasks, t.Attempt)
	}
	if p.location != "" {
		c.emit(DiscardState{ID: p.id, Location: p.location})
	}
	c.emit(NotifyAborted{ID: p.id, Tasks: tasks})
	c.failRequest(p.req, p.id, f)
}

// failRequest resolves a request as failed and applies the failure policy
// of Flink's CheckpointFailureManager: a failed synchronous savepoint fails
// the job (it would otherwise leave the job stopped); other savepoints never
// count; a checkpoint counts when its reason does and it is newer than the
// last completed one.
func (c *Coordinator) failRequest(r *request, id int64, f *Failure) {
	if id != 0 {
		c.stats.failed(id, r.savepoint(), c.clock.Now(), f)
	}
	c.emit(RequestDone{Request: r.seq, ID: id, Err: f})
	if r == c.last {
		c.last = nil // not the last checkpoint after all
	}
	if r.kind == RescaleCheckpoint && c.running {
		c.ResumePeriodic() // no rescale follows
	}
	switch {
	case r.kind == SyncSavepoint:
		if c.running {
			c.emit(FailJob{Cause: fmt.Errorf("coordinator: stop-with-savepoint failed: %w", f)})
		}
		return
	case r.savepoint(), !counted(f.Reason), id != 0 && id < c.lastCompletedID:
		return
	}
	c.consecutive++
	if c.cfg.Tolerable >= 0 && c.consecutive > c.cfg.Tolerable && c.running {
		c.emit(FailJob{Cause: fmt.Errorf("coordinator: %d consecutive checkpoint failures exceed the tolerable %d: %w", c.consecutive, c.cfg.Tolerable, f)})
		c.consecutive = 0
	}
}

func (c *Coordinator) pendingIDs() []int64 {
	ids := make([]int64, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// NumPending is the number of checkpoints in progress.
func (c *Coordinator) NumPending() int { return len(c.pending) }

// Stats returns the checkpoint statistics for the API.
func (c *Coordinator) Stats() *weirv1.ListCheckpointsResponse {
	out := c.stats.snapshot()
	out.NextCheckpoint = c.NextCheckpoint()
	return out
}

// CheckpointDetail returns one checkpoint's statistics with per-subtask acks.
func (c *Coordinator) CheckpointDetail(id int64) (*weirv1.GetCheckpointResponse, bool) {
	return c.stats.detail(id)
}
