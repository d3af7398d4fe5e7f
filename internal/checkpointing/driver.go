package checkpointing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/coordinator"

	"github.com/weirproject/weir/internal/checkpoint"

	"github.com/weirproject/weir/internal/fault"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Counter hands out checkpoint IDs (standalone or in etcd).
type Counter interface {
	Next(ctx context.Context) (int64, error)
}

// Store is the completed-checkpoint store: Add keeps the newest retained
// checkpoints and returns the ones it dropped.
type Store interface {
	Add(ctx context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error)
}

// Storage is checkpoint storage as the coordinator uses it.
type Storage interface {
	InitLocation(ctx context.Context, id int64, savepoint bool, target string) (string, error)
	// ReserveMetadata prepares a location for its metadata while the
	// tasks snapshot, so that writing it after the last ack is cheaper
	// (on a local file system the names are made durable ahead: one
	// fsync is left for the completion instead of two).
	ReserveMetadata(ctx context.Context, dir string) error
	// WriteMetadata writes dir's metadata durably; reserved says a
	// ReserveMetadata of dir succeeded.
	WriteMetadata(ctx context.Context, dir string, md *weirv1.CheckpointMetadata, reserved bool) (string, error)
	Discard(ctx context.Context, dir string) error
	DiscardStates(ctx context.Context, states []*weirv1.SubtaskState) error
	// DiscardShared deletes shared (incremental) state files that no
	// checkpoint references any more.
	DiscardShared(ctx context.Context, paths []string) error
}

// TaskGateway reaches the subtasks of the job. Each call names every
// subtask the trigger or notification is for, so an implementation can
// send one request per TaskManager; it returns once each got it, or the
// errors of those that did not.
type TaskGateway interface {
	TriggerCheckpoint(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, id int64, ts time.Time, opts *weirv1.CheckpointOptions) error
	NotifyCheckpointComplete(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, id, lastSubsumed int64, final bool) error
	NotifyCheckpointAborted(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, id int64) error
}

// TimerClock is the driver's clock: the state machine's Now plus timers.
type TimerClock interface {
	coordinator.Clock
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Executor runs a Driver's I/O off its loop. Without one a Driver runs its
// loop on a goroutine (Run) and each I/O on a goroutine of its own. With
// one the Driver is stepped: its owner's goroutine is the loop (every call
// runs there and then, and Wake runs the timers), and the executor decides
// when each I/O runs — the simulator runs it at a later simulated time, on
// that same goroutine, so the Driver's dispatch is what it tests.
type Executor interface {
	// Go runs io, with a context derived from ctx.
	Go(ctx context.Context, io func(ctx context.Context))
}

// Deps is everything a Driver works with, as interfaces so tests drive it
// with a fake clock and recording gateways.
type Deps struct {
	// Executor, if set, makes the Driver stepped (see Executor).
	Executor     Executor
	Clock        TimerClock // nil: the wall clock
	Rand         *rand.Rand // nil: seeded from the clock
	Counter      Counter
	Store        Store
	Storage      Storage
	Tasks        TaskGateway
	Coordinators []*CoordinatorHolder
	Hooks        []MasterHook
	// FailJob fails the job over; called off the driver's goroutine.
	FailJob func(cause error)
	// Finishing is told that checkpoint id completed, which ends the
	// subtasks, before they are notified; called on the driver's
	// goroutine, so it must not block.
	Finishing func(id int64)
	Metrics   *Metrics
	JobName   string
	Logger    *slog.Logger
	// Shared counts references to incremental checkpoints' shared files;
	// a new one when nil.
	Shared *coordinator.SharedRegistry
}

// Result is the outcome of a manual trigger.
type Result struct {
	ID   int64
	Path string
	Err  error
}

// ErrShutDown is returned to requests made after the driver closed.
var ErrShutDown = errors.New("coordinator: shut down")

// Driver runs a Coordinator on one goroutine — every state change happens
// there — and carries out its effects on other goroutines, feeding their
// outcomes back as events. No I/O happens on the loop.
type Driver struct {
	sm      *coordinator.Coordinator
	deps    Deps
	log     *slog.Logger
	metrics *jobMetrics
	events  chan func()
	done    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	waiters map[int64]func(Result) // owned by the loop
	// stepped: the owner's goroutine is the loop (Deps.Executor);
	// looping says an event is running on it.
	stepped, looping bool
	// finalizations counts Finalize effects whose outcome has not reached
	// the loop yet (owned by the loop).
	finalizations int
	// reservations are the ReserveMetadata calls of locations not yet
	// finalized or discarded, by location; owned by the loop.
	reservations map[string]<-chan error
	// timer is the loop's one wake-up timer on the wall clock, reused so
	// that an event costs no timer allocation (nil with an injected clock).
	timer  *time.Timer
	disc   *discarder
	ledger coordinator.Ledger
	// finalizing counts Finalize effects in flight (AwaitFinalizations).
	finalizing sync.WaitGroup
}

// NewDriver makes a driver; Run starts it.
func New(cfg coordinator.Config, deps Deps) *Driver {
	if deps.Clock == nil {
		deps.Clock = realClock{}
	}
	if deps.Rand == nil {
		deps.Rand = rand.New(rand.NewPCG(uint64(deps.Clock.Now().UnixNano()), 0))
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics(nil)
	}
	if deps.Shared == nil {
		deps.Shared = coordinator.NewSharedRegistry()
	}
	cfg.OperatorCoordinators = len(deps.Coordinators) > 0
	cfg.MasterHooks = len(deps.Hooks) > 0
	ctx, cancel := context.WithCancel(context.Background())
	log := deps.Logger.With("job_id", cfg.JobID)
	d := &Driver{
		sm:      coordinator.New(cfg, deps.Clock, deps.Rand),
		deps:    deps,
		log:     log,
		metrics: deps.Metrics.forJob(cfg.JobID, deps.JobName),
		events:  make(chan func(), 64),
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		waiters: map[int64]func(Result){},
		stepped: deps.Executor != nil,

		reservations: map[string]<-chan error{},
	}
	d.disc = newDiscarder(deps.Storage, log, d.spawn)
	d.ledger = coordinator.Ledger{Shared: deps.Shared}
	return d
}

// Run owns the coordinator until Close.
func (d *Driver) Run() {
	defer close(d.done)
	defer d.stopTimer()
	var wake <-chan time.Time
	var armed time.Time // the deadline wake fires for; zero: none
	for {
		select {
		case f := <-d.events:
			f()
		case <-wake:
			wake, armed = nil, time.Time{}
			d.sm.Tick()
		case <-d.disc.changed:
			d.sm.CleanupsInProgress(d.disc.count())
		case <-d.ctx.Done():
			return
		}
		d.process(d.sm.Ready())
		// Most events (acks) leave the deadline as it was: the armed timer
		// still fires at the right time.
		if next := d.sm.NextDeadline(); !next.Equal(armed) {
			armed = next
			wake = d.arm(next)
		}
	}
}

// stepped drivers: the owner's goroutine is the loop.

// settle carries out what the last event decided (a stepped driver's
// loop iteration, without the wait).
func (d *Driver) settle() {
	select {
	case <-d.disc.changed:
		d.sm.CleanupsInProgress(d.disc.count())
	default:
	}
	d.process(d.sm.Ready())
}

// Wake runs a stepped driver's timers: its owner calls it at NextDeadline.
func (d *Driver) Wake() { d.post(d.sm.Tick) }

// Finalizations is the number of checkpoints being finalized whose outcome
// the state machine has not learned yet (a stepped driver's owner waits
// for none before it picks a checkpoint to restore, as AwaitFinalizations
// does).
func (d *Driver) Finalizations() int { return d.finalizations }

// NextDeadline is when a stepped driver wants Wake (zero: never).
func (d *Driver) NextDeadline() time.Time { return d.sm.NextDeadline() }

// arm sets the loop's timer to fire at deadline (never when it is zero).
func (d *Driver) arm(deadline time.Time) <-chan time.Time {
	if deadline.IsZero() {
		d.stopTimer()
		return nil
	}
	wait := max(deadline.Sub(d.deps.Clock.Now()), 0)
	if _, wall := d.deps.Clock.(realClock); !wall {
		return d.deps.Clock.After(wait)
	}
	if d.timer == nil {
		d.timer = time.NewTimer(wait)
	} else {
		// Since Go 1.23 Reset also drops a value the channel still held, so
		// a stale expiry never fires for the new deadline.
		d.timer.Reset(wait)
	}
	return d.timer.C
}

func (d *Driver) stopTimer() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

// Close stops the loop and waits for every I/O goroutine, then for the
// discards queued until then. Requests still waiting fail with ErrShutDown.
// A stepped driver's I/O still to run finds its context cancelled, and
// its outcome is dropped.
func (d *Driver) Close() {
	if d.stepped {
		if d.ctx.Err() != nil {
			return // closed before
		}
		d.cancel()
		close(d.done)
	} else {
		d.cancel()
		<-d.done
		d.wg.Wait()
		d.disc.close()
	}
	for _, req := range slices.Sorted(maps.Keys(d.waiters)) {
		d.waiters[req](Result{Err: ErrShutDown})
	}
	d.waiters = nil
	d.metrics.release()
}

// post runs f on the loop; it gives up once the driver is closed.
func (d *Driver) post(f func()) bool {
	if d.ctx.Err() != nil {
		// Closed: the select below would pick at random between a free
		// slot in the buffer (that the stopped loop never reads) and Done.
		return false
	}
	if d.stepped {
		if d.looping {
			// Its owner must not call the driver from a callback the
			// driver runs: events would nest, which a driver with a
			// loop of its own never sees.
			panic("checkpointing: stepped driver called from its own loop")
		}
		d.looping = true
		defer func() { d.looping = false }()
		f()
		d.settle()
		return true
	}
	select {
	case d.events <- f:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// call runs f on the loop and waits for it. When it returns false (the
// driver closed), f may still run later: the caller must not read what f
// writes.
func (d *Driver) call(f func()) bool {
	done := make(chan struct{})
	if !d.post(func() { f(); close(done) }) {
		return false
	}
	select {
	case <-done:
		return true
	case <-d.ctx.Done():
		return false
	}
}

func (d *Driver) goIO(f func(ctx context.Context)) {
	if d.stepped {
		d.deps.Executor.Go(d.ctx, f)
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f(d.ctx)
	}()
}

// spawn runs f off the loop: on a goroutine, or on a stepped driver's
// executor.
func (d *Driver) spawn(f func()) {
	if d.stepped {
		d.deps.Executor.Go(d.ctx, func(context.Context) {
			f()
			// The loop goroutine wakes on the discarder's signal; a
			// stepped loop reads it at its next event: this one.
			d.post(func() {})
		})
		return
	}
	go f()
}

// Restore resets operator coordinators and master hooks to a restored
// checkpoint and records it in the statistics. Call it before Start.
func (d *Driver) Restore(ctx context.Context, md *weirv1.CheckpointMetadata, path string) error {
	states := map[string][]byte{}
	for _, s := range md.GetOperatorCoordinators() {
		states[s.GetName()] = s.GetData()
	}
	for _, h := range d.deps.Coordinators {
		if err := h.Coordinator.ResetToCheckpoint(md.GetCheckpointId(), states[h.Coordinator.Name()]); err != nil {
			return fmt.Errorf("coordinator: reset operator coordinator %s: %w", h.Coordinator.Name(), err)
		}
	}
	hooks := map[string][]byte{}
	for _, s := range md.GetMasterStates() {
		hooks[s.GetName()] = s.GetData()
	}
	for _, h := range d.deps.Hooks {
		if err := h.RestoreCheckpoint(ctx, md.GetCheckpointId(), hooks[h.Name()]); err != nil {
			return fmt.Errorf("coordinator: restore master hook %s: %w", h.Name(), err)
		}
	}
	savepoint := md.GetType() != weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT
	d.call(func() { d.sm.Restored(md.GetCheckpointId(), path, savepoint) })
	d.metrics.restoredAt.Set(float64(d.deps.Clock.Now().UnixNano()) / 1e9)
	return nil
}

// Start activates periodic checkpoints for a running job.
func (d *Driver) Start(tasks []coordinator.Task) { d.post(func() { d.sm.Start(tasks) }) }

// StartSoon activates periodic checkpoints, the first after the minimum
// pause (coordinator.StartSoon).
func (d *Driver) StartSoon(tasks []coordinator.Task) { d.post(func() { d.sm.StartSoon(tasks) }) }

// Stop aborts everything in flight; the job left RUNNING.
func (d *Driver) Stop(reason weirv1.CheckpointFailureReason) { d.call(func() { d.sm.Stop(reason) }) }

// SourceBacklog records whether a source subtask reports a backlog.
func (d *Driver) SourceBacklog(a *weirv1.ExecutionAttemptID, backlog bool) {
	d.post(func() { d.sm.SourceBacklog(a, backlog) })
}

// Reconfigure changes periodic checkpointing on the running coordinator.
func (d *Driver) Reconfigure(r coordinator.Reconfiguration) bool {
	return d.call(func() { d.sm.Reconfigure(r) })
}

// TaskFinished records a finished subtask.
func (d *Driver) TaskFinished(a *weirv1.ExecutionAttemptID) { d.post(func() { d.sm.TaskFinished(a) }) }

// Acknowledge feeds a subtask's ack. A stepped driver returns what the
// state machine made of it (known true); otherwise that is not known yet.
func (d *Driver) Acknowledge(ack *weirv1.AcknowledgeCheckpointRequest) (result coordinator.AckResult, known bool) {
	posted := d.post(func() {
		r, refused, del := d.ledger.Acknowledge(d.sm, ack)
		if d.stepped {
			result, known = r, true
		}
		switch {
		case refused != nil:
			d.log.Error("refusing checkpoint ack: its state references deleted shared files",
				"checkpoint_id", ack.GetCheckpointId(), "attempt", ack.GetAttempt().Key(), "err", refused)
			d.disc.add(discard{Deletion: *del})
		case r != coordinator.AckSuccess:
			d.log.Info("checkpoint ack not used", "checkpoint_id", ack.GetCheckpointId(), "attempt", ack.GetAttempt().Key(), "result", r)
		}
	})
	if !posted && ack.GetState() != nil {
		// The coordinator is gone, so is the checkpoint: do not leak its files.
		if err := d.deps.Storage.DiscardStates(context.Background(), []*weirv1.SubtaskState{ack.GetState()}); err != nil {
			d.log.Warn("discarding late ack state failed", "err", err)
		}
	}
	return result, known
}

// Decline feeds a subtask's decline.
func (d *Driver) Decline(dec *weirv1.DeclineCheckpointRequest) { d.post(func() { d.sm.Decline(dec) }) }

// Trigger requests a checkpoint or savepoint and waits for its outcome.
func (d *Driver) Trigger(ctx context.Context, kind coordinator.RequestKind, target string) Result {
	return d.await(ctx, func(done func(Result)) { d.Request(kind, target, done) })
}

// Request requests a checkpoint or savepoint; done gets its outcome, on
// the loop (ErrShutDown if the driver is closed, or closes before the
// request completes; a request still queued when the loop ends gets
// nothing, which is why Trigger also waits for the loop's end).
func (d *Driver) Request(kind coordinator.RequestKind, target string, done func(Result)) {
	if !d.post(func() { d.waiters[d.sm.Trigger(kind, kind == coordinator.Savepoint, target)] = done }) {
		done(Result{Err: ErrShutDown})
	}
}

// RequestStop requests a stop with a savepoint; done gets its outcome as
// Request's does.
func (d *Driver) RequestStop(target string, drain bool, done func(Result)) {
	if !d.post(func() { d.waiters[d.sm.StopWithSavepoint(target, drain)] = done }) {
		done(Result{Err: ErrShutDown})
	}
}

// ResumePeriodic resumes the periodic checkpoints a rescale's checkpoint
// paused, when the rescale did not go ahead.
func (d *Driver) ResumePeriodic() { d.post(d.sm.ResumePeriodic) }

// StopWithSavepoint takes a synchronous savepoint after which the tasks
// finish, and waits for it.
func (d *Driver) StopWithSavepoint(ctx context.Context, target string, drain bool) Result {
	return d.await(ctx, func(done func(Result)) { d.RequestStop(target, drain, done) })
}

func (d *Driver) await(ctx context.Context, request func(done func(Result))) Result {
	ch := make(chan Result, 1)
	request(func(r Result) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case <-d.done:
		return Result{Err: ErrShutDown}
	}
}

// Stats returns the checkpoint history.
func (d *Driver) Stats() *weirv1.ListCheckpointsResponse {
	var out *weirv1.ListCheckpointsResponse
	if !d.call(func() { out = d.sm.Stats() }) {
		return &weirv1.ListCheckpointsResponse{Counts: &weirv1.CheckpointCounts{}}
	}
	return out
}

// Detail returns one checkpoint's statistics.
func (d *Driver) Detail(id int64) (*weirv1.GetCheckpointResponse, bool) {
	var out *weirv1.GetCheckpointResponse
	var ok bool
	if !d.call(func() { out, ok = d.sm.CheckpointDetail(id) }) {
		// Closed meanwhile: the loop may still run the call, so out and
		// ok are not this goroutine's to read (a REST poll of a job
		// being cancelled raced with it).
		return nil, false
	}
	return out, ok
}

func (d *Driver) process(effects []coordinator.Effect) {
	for _, e := range effects {
		switch e := e.(type) {
		case coordinator.AllocateID:
			d.goIO(func(ctx context.Context) {
				id, err := d.deps.Counter.Next(ctx)
				d.post(func() { d.sm.IDAllocated(e.Request, id, err) })
			})
		case coordinator.InitLocation:
			d.goIO(func(ctx context.Context) {
				loc, err := d.deps.Storage.InitLocation(ctx, e.ID, e.Savepoint, e.Target)
				reserved := make(chan error, 1)
				posted := d.post(func() {
					if err == nil {
						// Before the state machine learns the location:
						// whatever finalizes or discards it finds this.
						d.reservations[loc] = reserved
					}
					d.sm.LocationReady(e.ID, loc, err)
				})
				if err == nil && posted {
					// Off the trigger's path: the tasks snapshot meanwhile.
					reserved <- d.deps.Storage.ReserveMetadata(ctx, loc)
				}
			})
		case coordinator.SnapshotOperatorCoordinators:
			d.goIO(func(ctx context.Context) {
				states, err := d.snapshotCoordinators(ctx, e.ID)
				d.post(func() {
					if !d.sm.SnapshottingCoordinators(e.ID) {
						// Aborted while the coordinators snapshotted: its
						// NotifyAborted may have come before a valve was
						// closed for it, which would then stay closed.
						for _, h := range d.deps.Coordinators {
							h.Valve.open(e.ID)
						}
					}
					d.sm.CoordinatorsSnapshotted(e.ID, states, err)
				})
			})
		case coordinator.SnapshotMasterHooks:
			d.goIO(func(ctx context.Context) {
				states, err := d.snapshotHooks(ctx, e.ID, e.Timestamp)
				d.post(func() { d.sm.MasterHooksDone(e.ID, states, err) })
			})
		case coordinator.SendTrigger:
			d.metrics.triggered.Inc()
			d.goIO(func(ctx context.Context) { d.sendTrigger(ctx, e) })
		case coordinator.Finalize:
			d.finalizing.Add(1)
			d.finalizations++
			reserved := d.takeReservation(e.Location)
			d.goIO(func(ctx context.Context) {
				defer d.finalizing.Done()
				path, subsumed, err := d.finalize(ctx, e, reserved)
				if errors.Is(err, checkpoint.ErrOutcomeUnknown) {
					d.log.Error("checkpoint outcome unknown: keeping its files and failing the job over", "checkpoint_id", e.ID, "err", err)
					d.post(func() {
						d.finalizations--
						d.sm.FinalizeOutcomeUnknown(e.ID, err)
					})
					return
				}
				d.post(func() {
					d.finalizations--
					d.sm.Finalized(e.ID, path, subsumed, err)
				})
			})
		case coordinator.NotifyComplete:
			if e.Repeat {
				d.log.Info("final checkpoint: notifying the subtasks that have not finished again", "checkpoint_id", e.ID, "subtasks", len(e.Tasks))
			} else {
				for _, h := range d.deps.Coordinators {
					h.Coordinator.NotifyCheckpointComplete(e.ID)
				}
				if e.Final && d.deps.Finishing != nil {
					d.deps.Finishing(e.ID)
				}
			}
			if len(e.Tasks) > 0 {
				d.goIO(func(ctx context.Context) {
					if err := d.deps.Tasks.NotifyCheckpointComplete(ctx, e.Tasks, e.ID, e.LastSubsumed, e.Final); err != nil && ctx.Err() == nil {
						d.log.Warn("notify checkpoint complete failed", "checkpoint_id", e.ID, "err", err)
					}
				})
			}
		case coordinator.NotifyAborted:
			for _, h := range d.deps.Coordinators {
				h.Coordinator.NotifyCheckpointAborted(e.ID)
				h.Valve.open(e.ID)
			}
			if len(e.Tasks) > 0 {
				d.goIO(func(ctx context.Context) {
					if err := d.deps.Tasks.NotifyCheckpointAborted(ctx, e.Tasks, e.ID); err != nil && ctx.Err() == nil {
						d.log.Debug("notify checkpoint aborted failed", "checkpoint_id", e.ID, "err", err)
					}
				})
			}
		case coordinator.DiscardState:
			// Decided on the loop, so no ack registers a file in between.
			d.disc.add(discard{Deletion: d.ledger.Discarded(e), reserved: d.takeReservation(e.Location)})
		case coordinator.RequestDone:
			d.finished(e)
		case coordinator.FailJob:
			d.log.Error("failing job: checkpoint failure", "err", e.Cause)
			if d.deps.FailJob != nil {
				d.goIO(func(context.Context) { d.deps.FailJob(e.Cause) })
			}
		}
	}
	d.metrics.inProgress.Set(float64(d.sm.NumPending()))
}

func (d *Driver) snapshotCoordinators(ctx context.Context, id int64) ([]*weirv1.NamedState, error) {
	var states []*weirv1.NamedState
	for _, h := range d.deps.Coordinators {
		h.Valve.close(id)
		data, err := h.Coordinator.CheckpointCoordinator(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Coordinator.Name(), err)
		}
		states = append(states, &weirv1.NamedState{Name: h.Coordinator.Name(), Data: data})
	}
	return states, nil
}

func (d *Driver) snapshotHooks(ctx context.Context, id int64, ts time.Time) ([]*weirv1.NamedState, error) {
	var states []*weirv1.NamedState
	for _, h := range d.deps.Hooks {
		data, err := h.TriggerCheckpoint(ctx, id, ts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name(), err)
		}
		states = append(states, &weirv1.NamedState{Name: h.Name(), Data: data})
	}
	return states, nil
}

// sendTrigger triggers every source, then releases the operator
// coordinators' held-back events: they now reach tasks behind the barrier.
func (d *Driver) sendTrigger(ctx context.Context, e coordinator.SendTrigger) {
	tasks := e.Tasks
	var first, rest error
	var wg sync.WaitGroup
	if fault.Compiled && len(tasks) > 1 && !d.stepped {
		// Builds with fault points trigger the first source on its own,
		// so the fault point between it and the others can skew their
		// barriers wherever the sources run.
		head := tasks[:1]
		wg.Go(func() { first = d.deps.Tasks.TriggerCheckpoint(ctx, head, e.ID, e.Timestamp, e.Options) })
		tasks = tasks[1:]
		if err := fault.Point(fault.JMBetweenTriggers); err != nil {
			rest, tasks = err, nil
		}
	}
	if len(tasks) > 0 {
		rest = d.deps.Tasks.TriggerCheckpoint(ctx, tasks, e.ID, e.Timestamp, e.Options)
	}
	wg.Wait()
	if e.ReleaseCoordinatorEvents {
		for _, h := range d.deps.Coordinators {
			h.Valve.open(e.ID)
		}
	}
	if err := errors.Join(first, rest); err != nil {
		d.log.Warn("triggering checkpoint failed", "checkpoint_id", e.ID, "err", err)
		d.post(func() { d.sm.TriggerFailed(e.ID, err) })
	}
}

// takeReservation hands over the ReserveMetadata outcome of location to
// the one finalizing or discarding it (nil: no reservation).
func (d *Driver) takeReservation(location string) <-chan error {
	r, ok := d.reservations[location]
	if ok {
		delete(d.reservations, location)
	}
	return r
}

// finalize writes the metadata and, for checkpoints, adds it to the store
// and discards what the store subsumed. reserved, if not nil, yields the
// outcome of the location's ReserveMetadata.
func (d *Driver) finalize(ctx context.Context, f coordinator.Finalize, reserved <-chan error) (string, int64, error) {
	var err error
	if reserved != nil {
		select {
		case err = <-reserved:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	var path string
	if err == nil {
		path, err = d.deps.Storage.WriteMetadata(ctx, f.Location, f.Metadata, reserved != nil)
	}
	if err != nil || (f.Savepoint && !f.Synchronous) {
		// Savepoints belong to the user: never in the store, never discarded.
		return path, 0, err
	}
	if err := fault.Point(fault.JMAfterMetadataBeforeStore); err != nil {
		return "", 0, fmt.Errorf("coordinator: add checkpoint %d to the store: %w", f.ID, err)
	}
	cp := checkpoint.Completed{ID: f.ID, MetadataPath: path, Dir: f.Location}
	if f.Synchronous {
		// Sinks commit on a stop-with-savepoint, so a failure before the
		// job finished must restore from it, not from an older checkpoint
		// (which would commit that output again). The user owns its files.
		cp.Dir, cp.Savepoint = "", true
	}
	subsumed, err := d.deps.Store.Add(ctx, cp)
	if err != nil {
		return "", 0, fmt.Errorf("coordinator: add checkpoint %d to the store: %w", f.ID, err)
	}
	if err := fault.Point(fault.JMAfterStoreBeforeNotify); err != nil {
		// The checkpoint is stored: to this JobManager that is a write
		// whose outcome it did not learn.
		err = fmt.Errorf("coordinator: add checkpoint %d to the store: %w: %w", f.ID, checkpoint.ErrOutcomeUnknown, err)
		return "", 0, err
	}
	var newest int64
	for _, c := range subsumed {
		newest = max(newest, c.ID)
		// The store no longer names c, so deleting its files cannot hurt a
		// recovery; the completion does not wait for it (a RemoveAll per
		// checkpoint was most of the finalize time).
		if del, ok := d.ledger.Subsumed(c); ok {
			d.disc.add(discard{Deletion: del})
		}
	}
	return path, newest, nil
}

// AwaitFinalizations waits until no checkpoint is being finalized and the
// outcome of the last one reached the state machine. A failover calls it
// after Stop and before it picks the checkpoint to restore: a _metadata
// write in flight may still add a newer checkpoint to the store, which the
// restore must then start from.
func (d *Driver) AwaitFinalizations(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		d.finalizing.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("coordinator: waiting for finalizing checkpoints: %w", ctx.Err())
	}
	// Finalize posts its outcome before it is done: one more trip through
	// the loop applies it.
	d.call(func() {})
	return nil
}

// RebuildShared rebuilds the shared-state registry from the retained
// checkpoints' metadata (a JobManager that recovers a job).
func (d *Driver) RebuildShared(retained []*weirv1.CheckpointMetadata) {
	d.deps.Shared.Rebuild(retained)
}

func (d *Driver) finished(e coordinator.RequestDone) {
	if done, ok := d.waiters[e.Request]; ok {
		delete(d.waiters, e.Request)
		done(Result{ID: e.ID, Path: e.Path, Err: e.Err})
	}
	var f *coordinator.Failure
	switch {
	case e.Err == nil:
		st, _ := d.sm.CheckpointDetail(e.ID)
		c := st.GetCheckpoint()
		d.metrics.completed.Inc()
		dur := time.Duration(c.GetEndToEndDurationMs()) * time.Millisecond
		d.metrics.duration.Observe(dur.Seconds())
		d.metrics.lastDuration.Set(dur.Seconds())
		d.metrics.lastSize.Set(float64(c.GetCheckpointedSize()))
		d.metrics.lastFullSize.Set(float64(c.GetStateSize()))
		d.metrics.lastID.Set(float64(e.ID))
		d.log.Info("checkpoint completed", "checkpoint_id", e.ID, "savepoint", c.GetIsSavepoint(), "duration_ms", c.GetEndToEndDurationMs(), "state_size", c.GetStateSize(), "path", e.Path)
	case errors.As(e.Err, &f) && e.ID != 0:
		d.metrics.failed.WithLabelValues(f.Reason.String()).Inc()
		d.log.Warn("checkpoint failed", "checkpoint_id", e.ID, "reason", f.Reason.String(), "err", e.Err)
	default:
		d.log.Debug("checkpoint request not run", "err", e.Err)
	}
}

// discard is the state one subsumed or aborted checkpoint leaves behind.
type discard struct {
	coordinator.Deletion
	// reserved, if not nil, is the location's ReserveMetadata, awaited
	// before the location goes so that it does not create a file in a
	// directory being removed.
	reserved <-chan error
}

// discarder deletes checkpoint state in the background, one discard after
// the other in the order queued, so neither the loop nor a completion
// waits for a RemoveAll. A worker goroutine runs while the queue is not
// empty; close waits for it to empty the queue.
type discarder struct {
	storage Storage
	log     *slog.Logger
	spawn   func(func())
	// changed signals (without blocking, coalesced) that the number of
	// discards not yet done changed: the decider holds new checkpoints
	// back while it is high.
	changed chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	queue   []discard
	// busy counts discards queued or being done.
	busy    int
	running bool
	closed  bool
}

func newDiscarder(s Storage, log *slog.Logger, spawn func(func())) *discarder {
	return &discarder{storage: s, log: log, spawn: spawn, changed: make(chan struct{}, 1)}
}

// count is the number of discards queued or being done.
func (q *discarder) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.busy
}

func (q *discarder) signal() {
	select {
	case q.changed <- struct{}{}:
	default: // one signal pending is enough: the reader reads the count
	}
}

func (q *discarder) add(x discard) {
	q.mu.Lock()
	if q.closed {
		// Nothing is left to run it later: do not leak the files.
		q.mu.Unlock()
		q.do(x)
		return
	}
	q.queue = append(q.queue, x)
	q.busy++
	if !q.running {
		q.running = true
		q.wg.Add(1)
		q.spawn(q.work)
	}
	q.mu.Unlock()
	q.signal()
}

func (q *discarder) work() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		batch := q.queue
		q.queue = nil
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for _, x := range batch {
			q.do(x)
			q.mu.Lock()
			q.busy--
			q.mu.Unlock()
			q.signal()
		}
	}
}

// do deletes with a context of its own: discards queued before Close still
// run to the end after the driver's context was cancelled.
func (q *discarder) do(x discard) {
	ctx := context.Background()
	var errs []error
	if len(x.Shared) > 0 {
		errs = append(errs, q.storage.DiscardShared(ctx, x.Shared))
	}
	if x.reserved != nil {
		<-x.reserved // its error is the checkpoint's, reported there
	}
	if x.Location != "" {
		errs = append(errs, q.storage.Discard(ctx, x.Location))
	}
	if len(x.States) > 0 {
		errs = append(errs, q.storage.DiscardStates(ctx, x.States))
	}
	if err := errors.Join(errs...); err != nil {
		q.log.Warn("discarding checkpoint state failed", "checkpoint_id", x.ID, "location", x.Location, "err", err)
	}
}

// close waits until everything queued was discarded.
func (q *discarder) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wg.Wait()
}

// Progress is Coordinator.Progress on the driver's goroutine. It never
// blocks: heartbeats call it, and a report is worth less than a heartbeat
// that is on time, so it is dropped when the driver is behind.
func (d *Driver) Progress(a *weirv1.ExecutionAttemptID, progress []*weirv1.CheckpointProgress) {
	if d.ctx.Err() != nil {
		return
	}
	if d.stepped {
		d.post(func() { d.sm.Progress(a, progress) })
		return
	}
	select {
	case d.events <- func() { d.sm.Progress(a, progress) }:
	default:
	}
}
