package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/attempts"
	"github.com/weirproject/weir/internal/leaderlink"
	"github.com/weirproject/weir/internal/registration"
	"github.com/weirproject/weir/internal/rpcpolicy"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// deployment is what a deploy carries: the attempt, its operator, and
// whether it restores from the job's final checkpoint (a bounded source
// then has nothing left to read).
type deployment struct {
	attempt *weirv1.ExecutionAttemptID
	vertex  string
	final   bool
	// restored is the subtask's state in the checkpoint restored
	// (restoredID), if any at its parallelism.
	restored   *weirv1.SubtaskState
	restoredID int64
	// refused: the checkpoint restored holds in-flight records this
	// subtask cannot take at its parallelism; it fails at its restore.
	refused string
}

// subtask is a simulated subtask running on a TaskManager.
type subtask struct {
	d        deployment
	v        *vertex
	stopping bool
	// endOfInput: the source ended, or every upstream subtask did.
	endOfInput bool
	ended      map[string]bool           // upstream subtasks that ended
	barriers   map[int64]map[string]bool // per checkpoint, the upstream subtasks whose barrier came
	finished   bool
	state      *backend
	// snapshotted is the newest checkpoint the subtask snapshotted.
	snapshotted int64
	// precommitted are the checkpoints a sink snapshotted whose epoch it
	// has not committed: a completion commits those up to it, as the
	// Kafka sink's transactions are (an aborted checkpoint's epoch waits
	// for the next completion).
	precommitted []int64
	// waiters answer the cancels waiting for the subtask to stop.
	waiters []func()
}

// taskManager is a simulated TaskManager: the registration state machine,
// the table of attempts and the simulated subtasks, driven as
// internal/taskmanager drives them.
type taskManager struct {
	w      *world
	id     string
	slots  int
	member *registration.Member
	link   *leaderlink.Link
	table  *attempts.Table
	tasks  map[string]*subtask
	wake   time.Time
	// leader is the JobManager this one obeys (registration.Fence).
	leader string
}

func (w *world) tm(id string) *taskManager { return w.sim.tms[id] }

func (tm *taskManager) start() {
	tm.member = registration.New(tm.w.clock, orphanTimeout)
	tm.link = tm.newLink()
	tm.table = attempts.New()
	tm.tasks = map[string]*subtask{}
	tm.wake = time.Time{}
	tm.member.LeaderChanged(tm.w.sim.jm.addr)
	tm.step()
}

// step carries out the registration's effects, through the TaskManager's
// own link (internal/leaderlink), and arms its next deadline.
func (tm *taskManager) step() {
	w := tm.w
	tm.link.Drain()
	next := tm.member.NextDeadline()
	if next.IsZero() || next.Equal(tm.wake) {
		return
	}
	tm.wake = next
	inc := w.incarnation[tm.id]
	w.at(next, tm.id+" registration tick", func() {
		if w.incarnation[tm.id] == inc && !w.down[tm.id] && tm.wake.Equal(next) {
			tm.wake = time.Time{}
			tm.member.Tick()
			tm.step()
		}
	})
}

// newLink is the link of this incarnation of the TaskManager: its calls
// run as coroutines over the simulated network, and their answers reach
// only the incarnation that asked.
func (tm *taskManager) newLink() *leaderlink.Link {
	w := tm.w
	inc := w.incarnation[tm.id]
	current := func() bool { return w.incarnation[tm.id] == inc && !w.down[tm.id] }
	return leaderlink.New(tm.member, leaderlink.Deps{
		Executor: tmExecutor{tm},
		Post: func(f func()) {
			w.after(0, tm.id+" registration answer", func() {
				if current() {
					f()
					tm.step()
				}
			})
		},
		JobManager:  tm,
		TaskManager: tm,
		Logger:      slog.New(slog.DiscardHandler),
	})
}

// tmExecutor runs a TaskManager's call as a coroutine, at once.
type tmExecutor struct{ tm *taskManager }

func (x tmExecutor) Go(ctx context.Context, io func(context.Context)) {
	x.tm.w.spawn(func(p *proc) { io(context.WithValue(ctx, procKey{}, p)) })
}

func (tm *taskManager) Register(e registration.Register) func(context.Context) (registration.Registration, error) {
	w := tm.w
	reports := tm.reports()
	return func(ctx context.Context) (registration.Registration, error) {
		var r registration.Registration
		err := w.await(ctx, 1, func(done func(error)) {
			w.call(tm.id, e.Addr, "register "+tm.id, e.Timeout, func() func() {
				reg, keep, err := w.sim.jms[e.Addr].register(tm.id, tm.slots, reports)
				return func() {
					r = registration.Registration{ID: reg, JobManagerID: e.Addr, Interval: heartbeatInterval, Timeout: heartbeatTimeout, Keep: keep}
					done(err)
				}
			}, func() { done(errTimeout) })
		}, func() {})
		return r, err
	}
}

// Heartbeat reports the attempts the table holds live when it is sent.
func (tm *taskManager) Heartbeat(e registration.Heartbeat) func(context.Context) (bool, error) {
	w := tm.w
	running := tm.table.Live()
	return func(ctx context.Context) (bool, error) {
		again := false
		err := w.await(ctx, 1, func(done func(error)) {
			w.call(tm.id, e.Addr, "heartbeat "+tm.id, e.Timeout, func() func() {
				a := w.sim.jms[e.Addr].heartbeat(tm.id, e.Registration, running)
				return func() {
					again = a
					done(nil)
				}
			}, func() { done(errTimeout) })
		}, func() {})
		return again, err
	}
}

func (tm *taskManager) Fence(e registration.Fence) { tm.leader = e.JobManagerID }

func (tm *taskManager) CancelAll(reason string, keep []string) {
	live := tm.table.Live()
	if len(live) > len(keep) {
		tm.w.logf("%s: cancelling all subtasks but %d: %s", tm.id, len(keep), reason)
	}
	for _, a := range live {
		if !slices.Contains(keep, a.Key()) {
			tm.cancelTask(a) //nolint:errcheck // each reports CANCELED
		}
	}
}

// reports is what a registration reports: the attempts deployed here, as
// the TaskManager's attemptReports lists them.
func (tm *taskManager) reports() []scheduler.AttemptReport {
	var out []scheduler.AttemptReport
	for _, a := range tm.table.Live() {
		r := scheduler.AttemptReport{Attempt: a, State: weirv1.ExecutionState_EXECUTION_STATE_DEPLOYING}
		if s := tm.tasks[a.Key()]; s != nil {
			r.State, r.EndOfInput = weirv1.ExecutionState_EXECUTION_STATE_RUNNING, s.endOfInput
		}
		out = append(out, r)
	}
	return out
}

func (tm *taskManager) Unregistered(reason string) {
	tm.w.logf("%s: unregistered: %s", tm.id, reason)
}

// deploy reserves the attempt and builds it; once built it runs, unless
// it was cancelled meanwhile. The answer comes once it was built, as
// DeployTask answers.
func (tm *taskManager) deploy(d deployment) error {
	w := tm.w
	if err := tm.table.Deploy([]*weirv1.ExecutionAttemptID{d.attempt}, w.now()); err != nil {
		w.logf("%s: deploy %s refused: %v", tm.id, d.attempt.Key(), err)
		if errors.Is(err, attempts.ErrCancelled) {
			return errRefused
		}
		return err
	}
	build := w.between(time.Millisecond, 30*time.Millisecond)
	if w.chance(0.1) {
		build = w.between(500*time.Millisecond, 3*time.Second) // a large state to restore
	}
	inc := w.incarnation[tm.id]
	w.after(build, "build "+d.attempt.Key(), func() {
		if w.incarnation[tm.id] != inc {
			return
		}
		if !tm.table.Started([]*weirv1.ExecutionAttemptID{d.attempt}) {
			tm.table.Ended([]*weirv1.ExecutionAttemptID{d.attempt})
			w.logf("%s: %s cancelled while it was deployed", tm.id, d.attempt.Key())
			tm.report(d.attempt, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, false, "")
			return
		}
		tm.run(d)
	})
	return nil
}

func (tm *taskManager) run(d deployment) {
	w := tm.w
	v := w.sim.vertices[d.vertex]
	s := &subtask{d: d, v: v, ended: map[string]bool{}, barriers: map[int64]map[string]bool{}, state: newBackend(d.restored, d.restoredID)}
	tm.tasks[d.attempt.Key()] = s
	w.logf("%s: %s running", tm.id, d.attempt.Key())
	w.sim.started(tm.id, d.attempt)
	tm.connect(s)
	tm.report(d.attempt, weirv1.ExecutionState_EXECUTION_STATE_RUNNING, false, "")
	if d.refused != "" {
		tm.fail(s, d.refused)
		return
	}
	if v.source && w.sim.bounded {
		length := w.between(500*time.Millisecond, 4*time.Second)
		if d.final {
			length = 0 // restored from the final checkpoint: nothing left
		}
		inc := w.incarnation[tm.id]
		w.after(length, "end of input "+d.attempt.Key(), func() {
			if w.incarnation[tm.id] == inc && tm.tasks[d.attempt.Key()] == s && !s.stopping {
				tm.endOfInput(s)
			}
		})
	}
}

func (tm *taskManager) endOfInput(s *subtask) {
	s.endOfInput = true
	tm.w.logf("%s: %s end of input", tm.id, s.d.attempt.Key())
	tm.report(s.d.attempt, weirv1.ExecutionState_EXECUTION_STATE_RUNNING, true, "")
	tm.downstream(s, "end", func(t *taskManager, down *subtask) { t.upstreamEnded(down, s) })
}

// downstream hands an event of s (a barrier, its end) to the subtasks its
// output reaches, in order over each channel.
func (tm *taskManager) downstream(s *subtask, what string, f func(*taskManager, *subtask)) {
	w := tm.w
	for _, t := range w.sim.sortedTMs() {
		for _, key := range slices.Sorted(maps.Keys(t.tasks)) {
			down := t.tasks[key]
			if down.stopping || !feeds(s, down) {
				continue
			}
			w.pipe(tm.id, t.id, s.d.attempt.Key()+" → "+key, what, func() {
				if cur := t.tasks[key]; cur == down && !down.stopping {
					f(t, down)
				}
			})
		}
	}
}

// feeds reports whether up's output reaches down.
func feeds(up, down *subtask) bool {
	if !slices.Contains(down.v.inputs, up.v.name) {
		return false
	}
	return !down.v.forward || down.d.attempt.GetSubtaskIndex() == up.d.attempt.GetSubtaskIndex()
}

// connect gives a subtask that starts what its upstream subtasks already
// sent: an end of input waits in their output for it to read.
func (tm *taskManager) connect(down *subtask) {
	w := tm.w
	for _, t := range w.sim.sortedTMs() {
		if w.down[t.id] {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(t.tasks)) {
			up := t.tasks[key]
			if up.endOfInput && !up.stopping && feeds(up, down) {
				w.pipe(t.id, tm.id, key+" → "+down.d.attempt.Key(), "end", func() {
					if tm.tasks[down.d.attempt.Key()] == down && !down.stopping {
						tm.upstreamEnded(down, up)
					}
				})
			}
		}
	}
}

func upstreamName(s *subtask) string {
	return fmt.Sprintf("%s/%d", s.v.name, s.d.attempt.GetSubtaskIndex())
}

// upstreams is how many upstream subtasks feed s.
func (tm *taskManager) upstreams(s *subtask) int {
	n := 0
	for _, in := range s.v.inputs {
		if s.v.forward {
			n++
		} else {
			n += int(tm.w.sim.vertices[in].parallelism)
		}
	}
	return n
}

func (tm *taskManager) upstreamEnded(s, up *subtask) {
	s.ended[upstreamName(up)] = true
	if !s.endOfInput && len(s.ended) == tm.upstreams(s) {
		tm.endOfInput(s)
	}
}

// trigger starts checkpoint id at a source.
func (tm *taskManager) trigger(a *weirv1.ExecutionAttemptID, id int64, unaligned bool) error {
	s := tm.tasks[a.Key()]
	if s == nil || s.stopping {
		return errNotFound
	}
	if id <= s.snapshotted {
		return nil // delivered twice, or overtaken: as Task.TriggerCheckpoint
	}
	tm.barrier(s, id, unaligned)
	return nil
}

// barrier: s takes its snapshot of checkpoint id, acks it and passes the
// barrier on. Unaligned, a subtask with broadcast inputs records the
// records in flight on them (there always are some, as under
// back-pressure).
func (tm *taskManager) barrier(s *subtask, id int64, unaligned bool) {
	w := tm.w
	s.snapshotted = id
	if s.v.sink {
		s.precommitted = append(s.precommitted, id)
	}
	ack := &weirv1.AcknowledgeCheckpointRequest{Attempt: s.d.attempt, CheckpointId: id, EndOfInput: s.endOfInput}
	s.state.write(w.rng.IntN(3) == 0)
	w.after(w.between(time.Millisecond, 20*time.Millisecond), "snapshot "+s.d.attempt.Key(), func() {
		if tm.tasks[s.d.attempt.Key()] != s || s.stopping {
			return
		}
		// The asynchronous part uploads, then acknowledges.
		key := s.d.attempt.Key()
		location := fmt.Sprintf("chk-%d", id)
		own := location + "/" + key
		w.files.upload(location, own)
		ack.State = &weirv1.SubtaskState{
			Vertex: s.v.name, SubtaskIndex: s.d.attempt.GetSubtaskIndex(), Parallelism: s.v.parallelism,
			KeyedState:  &weirv1.StateHandle{Path: own},
			SharedFiles: s.state.snapshot(id, key, func(path string) { w.files.upload("", path) }),
		}
		if unaligned && s.v.broadcast {
			w.files.upload(location, own+"-channels")
			ack.State.ChannelState = &weirv1.StateHandle{Path: own + "-channels"}
		}
		if jm := w.sim.jms[tm.leader]; jm != nil {
			w.send(tm.id, jm.addr, fmt.Sprintf("ack %d %s", id, s.d.attempt.Key()), func() { jm.acknowledge(tm.id, ack) })
		}
	})
	tm.downstream(s, fmt.Sprintf("barrier %d", id), func(t *taskManager, down *subtask) {
		if id <= down.snapshotted {
			return // a barrier of a checkpoint already taken (or overtaken) is late
		}
		got := down.barriers[id]
		if got == nil {
			got = map[string]bool{}
			down.barriers[id] = got
		}
		got[upstreamName(s)] = true
		if len(got) == t.upstreams(down) {
			delete(down.barriers, id)
			t.barrier(down, id, unaligned)
		}
	})
}

// notifyComplete: a sink commits checkpoint id; every subtask finishes on
// the final one.
func (tm *taskManager) notifyComplete(a *weirv1.ExecutionAttemptID, id int64, final bool) error {
	w := tm.w
	s := tm.tasks[a.Key()]
	if s == nil || s.stopping {
		return errNotFound
	}
	if s.finished {
		return nil
	}
	s.state.completed(id)
	if s.v.sink {
		if w.chance(w.cfg.CommitFailP) {
			w.fault("commit", "%s fails committing checkpoint %d", a.Key(), id)
			tm.fail(s, fmt.Sprintf("commit of checkpoint %d failed", id))
			return nil
		}
		for len(s.precommitted) > 0 && s.precommitted[0] <= id {
			w.sim.committed(tm.id, a, s.precommitted[0], s.d.restoredID)
			s.precommitted = s.precommitted[1:]
		}
	}
	if final {
		s.finished = true
		inc := w.incarnation[tm.id]
		w.after(w.between(time.Millisecond, 10*time.Millisecond), "finish "+a.Key(), func() {
			if w.incarnation[tm.id] == inc && tm.tasks[a.Key()] == s && !s.stopping {
				tm.stop(s, weirv1.ExecutionState_EXECUTION_STATE_FINISHED, "")
			}
		})
	}
	return nil
}

// notifyAborted: checkpoint id will never complete.
func (tm *taskManager) notifyAborted(a *weirv1.ExecutionAttemptID, id int64) error {
	s := tm.tasks[a.Key()]
	if s == nil || s.stopping {
		return errNotFound
	}
	s.state.aborted(id)
	return nil
}

// cancelTask is CancelTask: a cancel of an attempt not held leaves a
// tombstone (attempts.Table) and answers NotFound.
func (tm *taskManager) cancelTask(a *weirv1.ExecutionAttemptID) error {
	_, err := tm.cancel(a)
	return err
}

// cancelAndWait is CancelTask as it answers: once the subtask stopped
// (a JobManager whose call times out first asks again).
func (tm *taskManager) cancelAndWait(a *weirv1.ExecutionAttemptID, reply func(error)) {
	s, err := tm.cancel(a)
	if s == nil || err != nil {
		reply(err)
		return
	}
	s.waiters = append(s.waiters, func() { reply(nil) })
}

// cancel cancels a, and returns the subtask that is stopping (nil when
// there is none to wait for: not known, or still being deployed, which
// a CANCELED report follows).
func (tm *taskManager) cancel(a *weirv1.ExecutionAttemptID) (*subtask, error) {
	w := tm.w
	switch tm.table.Cancel(a, w.now()) {
	case attempts.Unknown:
		return nil, errNotFound
	case attempts.WhileDeploying:
		return nil, nil
	}
	s := tm.tasks[a.Key()]
	if s == nil {
		return nil, nil
	}
	if s.stopping {
		return s, nil
	}
	s.stopping = true
	d := w.between(time.Millisecond, 10*time.Millisecond)
	if w.chance(0.05) {
		d = w.between(rpcTimeout, 2*rpcTimeout) // a subtask slow to stop
	}
	inc := w.incarnation[tm.id]
	w.after(d, "cancelled "+a.Key(), func() {
		if w.incarnation[tm.id] == inc {
			tm.stop(s, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "")
		}
	})
	return s, nil
}

func (tm *taskManager) fail(s *subtask, cause string) {
	s.stopping = true
	tm.stop(s, weirv1.ExecutionState_EXECUTION_STATE_FAILED, cause)
}

// stop ends a subtask and reports how.
func (tm *taskManager) stop(s *subtask, st weirv1.ExecutionState, cause string) {
	a := s.d.attempt
	if tm.tasks[a.Key()] != s {
		return
	}
	delete(tm.tasks, a.Key())
	tm.table.Ended([]*weirv1.ExecutionAttemptID{a})
	for _, f := range s.waiters {
		f()
	}
	tm.w.logf("%s: %s %s", tm.id, a.Key(), strings.TrimPrefix(st.String(), "EXECUTION_STATE_"))
	tm.report(a, st, false, cause)
}

// report sends a state report until the JobManager answers it, as the
// TaskManager's send does; it gives up on NotFound or when this
// TaskManager restarted.
func (tm *taskManager) report(a *weirv1.ExecutionAttemptID, st weirv1.ExecutionState, endOfInput bool, cause string) {
	tm.reportAttempt(a, st, endOfInput, cause, rpcpolicy.Retries())
}

// reportAttempt sends a state report until rpcpolicy.Report says it is
// done or refused, as the TaskManager's send does.
func (tm *taskManager) reportAttempt(a *weirv1.ExecutionAttemptID, st weirv1.ExecutionState, endOfInput bool, cause string, backoff rpcpolicy.Backoff) {
	w := tm.w
	inc := w.incarnation[tm.id]
	what := strings.TrimPrefix(st.String(), "EXECUTION_STATE_")
	if endOfInput {
		what = "END_OF_INPUT"
	}
	jm := w.sim.jms[tm.leader]
	if jm == nil {
		return // not registered: nobody to report to
	}
	answered := func(err error) {
		switch rpcpolicy.Report(code(err)) {
		case rpcpolicy.Done:
			return
		case rpcpolicy.Refused:
			w.logf("%s: report %s %s refused: %v", tm.id, a.Key(), what, err)
			return
		}
		if w.incarnation[tm.id] != inc {
			return // restarted: the report goes with it
		}
		// A new leader takes it: it adopts the attempt.
		w.after(backoff.Next(), "report retry", func() {
			if w.incarnation[tm.id] == inc {
				tm.reportAttempt(a, st, endOfInput, cause, backoff)
			}
		})
	}
	w.call(tm.id, jm.addr, fmt.Sprintf("report %s %s", a.Key(), what), rpcTimeout, func() func() {
		err := jm.report(a, st, endOfInput, cause)
		return func() { answered(err) }
	}, func() { answered(errTimeout) })
}
