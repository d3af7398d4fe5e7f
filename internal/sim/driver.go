package sim

// The JobManager's checkpoint coordinator here is the production
// checkpointing.Driver, stepped: the simulator's goroutine is its loop, and
// each of its I/O runs as a coroutine at a later simulated time. An I/O
// that waits for the network (a trigger, a notification) parks its
// coroutine until the simulated answers came, so the Driver's own code —
// which effect becomes which call, what it waits for, what it feeds back —
// is what runs, with the simulated etcd (counter, completed store),
// checkpoint storage and network as its dependencies.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/checkpointing"
	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// errOver is what a parked I/O gets when the simulation ends first.
var errOver = errors.New("sim: the simulation ended")

// proc is a coroutine: an I/O of a Driver that may park until simulated
// answers arrive. Only one of the simulator and its procs runs at a time,
// so a seed still replays bit for bit.
type proc struct {
	next    func() (struct{}, bool)
	stop    func()
	yield   func(struct{}) bool
	stopped bool
	ended   bool
}

type procKey struct{}

// spawn runs f as a coroutine until it parks or returns.
func (w *world) spawn(f func(p *proc)) {
	p := &proc{}
	p.next, p.stop = iter.Pull(func(yield func(struct{}) bool) {
		p.yield = yield
		f(p)
	})
	w.procs = append(w.procs, p)
	w.step(p)
}

// step runs p until it parks again or returns.
func (w *world) step(p *proc) {
	if _, ok := p.next(); !ok {
		p.ended = true
		w.procs = slices.DeleteFunc(w.procs, func(q *proc) bool { return q.ended })
	}
}

// park suspends p until the simulator steps it; false: the simulation
// ended meanwhile.
func (p *proc) park() bool {
	if p.stopped || !p.yield(struct{}{}) {
		p.stopped = true
		return false
	}
	return true
}

// endProcs ends the coroutines still parked: each returns errOver from its
// wait and runs to its end.
func (w *world) endProcs() {
	for len(w.procs) > 0 {
		p := w.procs[0]
		w.procs = w.procs[1:]
		p.stopped = true
		p.stop()
	}
}

// executor runs a Driver's I/O after a simulated delay, as a coroutine;
// once it parks or ends, the JobManager carries on with what it fed back.
type executor struct{ jm *jobManager }

func (x executor) Go(ctx context.Context, io func(context.Context)) {
	jm := x.jm
	w := jm.w
	w.after(w.between(100*time.Microsecond, 5*time.Millisecond), "coordinator I/O", func() {
		w.spawn(func(p *proc) { io(context.WithValue(ctx, procKey{}, p)) })
		jm.settled()
	})
}

// await parks the I/O of ctx until start's done was called as many times
// as n, and returns the errors done got; the JobManager then carries on
// with what the I/O fed back.
func (jm *jobManager) await(ctx context.Context, n int, start func(done func(error))) error {
	return jm.w.await(ctx, n, start, jm.settled)
}

// await parks the coroutine of ctx until start's done was called n times;
// once it parked or ended again, settled runs.
func (w *world) await(ctx context.Context, n int, start func(done func(error)), settled func()) error {
	p := ctx.Value(procKey{}).(*proc)
	var errs []error
	parked := false
	start(func(err error) {
		errs = append(errs, err)
		n--
		if n == 0 && parked {
			w.step(p)
			settled()
		}
	})
	if n > 0 {
		parked = true
		if !p.park() {
			return errOver
		}
	}
	return errors.Join(errs...)
}

// settled: an I/O fed its outcome back; what waited for it goes on.
func (jm *jobManager) settled() {
	if jm.deposed {
		return
	}
	if jm.drv.Finalizations() == 0 {
		waiting := jm.finalized
		jm.finalized = nil
		for _, done := range waiting {
			done(nil)
		}
	}
	jm.drain()
}

// newDriver is the JobManager's checkpoint coordinator for graph g, as
// the JobManager builds it, on the simulated dependencies.
func (jm *jobManager) newDriver(g *weirv1.JobGraph) *checkpointing.Driver {
	w := jm.w
	cp := g.GetCheckpointing()
	return checkpointing.New(coordinator.Config{
		JobID: "job", Interval: cp.GetInterval().AsDuration(), Timeout: cp.GetTimeout().AsDuration(),
		MaxConcurrent: int(cp.GetMaxConcurrent()), Tolerable: int(cp.GetTolerableFailedCheckpoints()),
		MaxParallelism: int(g.GetMaxParallelism()),
		Options:        &weirv1.CheckpointOptions{ExactlyOnce: true, Unaligned: cp.GetUnaligned()},
		AlignRescale:   jobgraph.HasBroadcastEdge(g),
	}, checkpointing.Deps{
		Executor: executor{jm},
		Clock:    steppedClock{w.clock},
		Rand:     rand.New(rand.NewPCG(w.rng.Uint64(), 0)),
		Counter:  simCounter{jm},
		Store:    simStore{jm},
		Storage:  simStorage{jm},
		Tasks:    simGateway{jm},
		FailJob: func(cause error) {
			// Called off the loop, as the JobManager's posts to its job loop.
			if !jm.deposed {
				jm.sched.Fail(cause.Error())
				jm.drain()
			}
		},
		Finishing: func(id int64) {
			if ha := w.sim.ha; len(ha.store) > 0 && ha.store[len(ha.store)-1].id == id {
				ha.store[len(ha.store)-1].final = true
			}
			jm.later("finishing", func() {
				jm.sched.Finishing()
				jm.drain()
			})
		},
		Logger: slog.New(slog.DiscardHandler),
	})
}

// later runs f as an event of its own: a Driver's callbacks run on its
// loop, where the JobManager's goroutines that wait for them never run.
func (jm *jobManager) later(name string, f func()) {
	jm.w.after(0, name, func() {
		if !jm.deposed {
			f()
		}
	})
}

// steppedClock is the simulated clock; a stepped Driver arms no timer
// (the JobManager calls Wake at its NextDeadline).
type steppedClock struct{ *clock }

func (steppedClock) After(time.Duration) <-chan time.Time {
	panic("sim: a stepped driver arms no timer")
}

// simCounter is the checkpoint ID counter in the simulated etcd.
type simCounter struct{ jm *jobManager }

func (c simCounter) Next(ctx context.Context) (int64, error) {
	w, ha := c.jm.w, c.jm.w.sim.ha
	switch {
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case w.chance(0.01):
		w.fault("counter", "incrementing the checkpoint ID counter fails")
		return 0, errors.New("etcd unavailable")
	case w.chance(0.005):
		// Timed out: the increment may or may not have been applied;
		// either way the ID is not used.
		applied := w.rng.IntN(2) == 0
		w.fault("counter-unknown", "incrementing the checkpoint ID counter timed out (applied: %t)", applied)
		if applied {
			ha.counter++
		}
		return 0, errTimeout
	}
	ha.counter++
	return ha.counter, nil
}

// simStore is the completed-checkpoint store in the simulated etcd: it
// keeps the newest three, and refuses a deposed leader's writes.
type simStore struct{ jm *jobManager }

func (s simStore) Add(ctx context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error) {
	jm, w := s.jm, s.jm.w
	if jm.deposed || ctx.Err() != nil {
		return nil, errors.New("fenced: no longer the leader")
	}
	md := jm.metadata[cp.MetadataPath]
	delete(jm.metadata, cp.MetadataPath)
	add := func() []completed {
		ha := w.sim.ha
		if n := len(ha.store); n > 0 && ha.store[n-1].id >= cp.ID {
			w.fail("checkpoint %d stored after checkpoint %d: checkpoint IDs must only grow, across leaders too", cp.ID, ha.store[n-1].id)
		}
		ha.store = append(ha.store, completed{id: cp.ID, savepoint: cp.Savepoint, md: md})
		w.files.dirty = true
		var dropped []completed
		if len(ha.store) > 3 {
			dropped, ha.store = ha.store[:1], ha.store[1:]
		}
		return dropped
	}
	if w.chance(0.01) {
		// etcd timed out: the entry may or may not be there. The job
		// fails over and its restore reads what the store holds.
		stored := w.rng.IntN(2) == 0
		w.fault("store-unknown", "adding checkpoint %d to the store timed out (stored: %t)", cp.ID, stored)
		if stored {
			add()
		}
		return nil, fmt.Errorf("%w: %w", checkpoint.ErrOutcomeUnknown, errTimeout)
	}
	var subsumed []checkpoint.Completed
	for _, c := range add() {
		dir := fmt.Sprintf("chk-%d", c.id)
		if c.savepoint {
			dir = ""
		}
		subsumed = append(subsumed, checkpoint.Completed{ID: c.id, Dir: dir, Savepoint: c.savepoint})
	}
	jm.lastCompletion, jm.completions = w.now(), jm.completions+1
	w.logf("jm: checkpoint %d stored", cp.ID)
	return subsumed, nil
}

// simStorage is checkpoint storage: locations are chk-<id>, and what is
// discarded goes from the simulated files.
type simStorage struct{ jm *jobManager }

func (simStorage) InitLocation(_ context.Context, id int64, _ bool, _ string) (string, error) {
	return fmt.Sprintf("chk-%d", id), nil
}

func (simStorage) ReserveMetadata(context.Context, string) error { return nil }

func (s simStorage) WriteMetadata(ctx context.Context, dir string, md *weirv1.CheckpointMetadata, _ bool) (string, error) {
	w := s.jm.w
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if w.chance(0.02) {
		w.fault("storage", "writing the metadata of checkpoint %d fails", md.GetCheckpointId())
		return "", errors.New("storage unavailable")
	}
	path := dir + "/_metadata"
	s.jm.metadata[path] = md
	return path, nil
}

func (s simStorage) Discard(_ context.Context, dir string) error {
	s.jm.w.files.discardLocation(dir)
	return nil
}

func (s simStorage) DiscardStates(_ context.Context, states []*weirv1.SubtaskState) error {
	for _, st := range states {
		for _, p := range storage.OwnPaths(st) {
			s.jm.w.files.remove(p)
		}
	}
	return nil
}

func (s simStorage) DiscardShared(_ context.Context, paths []string) error {
	for _, p := range paths {
		s.jm.w.files.remove(p)
	}
	return nil
}

// simGateway reaches the subtasks over the simulated network: one call per
// subtask, answered or timed out.
type simGateway struct{ jm *jobManager }

func (g simGateway) each(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, name string, handle func(*taskManager, *weirv1.ExecutionAttemptID) error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return g.jm.await(ctx, len(tasks), func(done func(error)) {
		for _, a := range tasks {
			g.jm.toTask(a, name+" "+a.Key(), func(t *taskManager) error { return handle(t, a) }, done)
		}
	})
}

func (g simGateway) TriggerCheckpoint(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, id int64, _ time.Time, opts *weirv1.CheckpointOptions) error {
	g.jm.w.logf("jm: trigger checkpoint %d", id)
	unaligned := opts.GetUnaligned()
	return g.each(ctx, tasks, fmt.Sprintf("trigger %d", id), func(t *taskManager, a *weirv1.ExecutionAttemptID) error {
		return t.trigger(a, id, unaligned)
	})
}

func (g simGateway) NotifyCheckpointComplete(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, id, _ int64, final bool) error {
	g.jm.w.logf("jm: notify checkpoint %d complete final=%t to %d subtasks", id, final, len(tasks))
	return g.each(ctx, tasks, fmt.Sprintf("notify %d", id), func(t *taskManager, a *weirv1.ExecutionAttemptID) error {
		return t.notifyComplete(a, id, final)
	})
}

func (g simGateway) NotifyCheckpointAborted(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, id int64) error {
	return g.each(ctx, tasks, fmt.Sprintf("aborted %d", id), func(t *taskManager, a *weirv1.ExecutionAttemptID) error {
		return t.notifyAborted(a, id)
	})
}
