// Package sim is a deterministic simulation of Weir's control plane, in
// the manner of FoundationDB's simulator and TigerBeetle's VOPR: one
// JobManager and several TaskManagers run in one goroutine on a simulated
// clock, and every message between them goes through a simulated network
// that delays, reorders, drops and duplicates it, and partitions hosts.
// TaskManagers crash and come back; subtasks fail; sinks fail to commit.
//
// The nodes run the production state machines — the job's lifecycle
// (internal/scheduler), a TaskManager's registration (internal/registration)
// and its table of attempts (internal/attempts) — and the checkpoint
// coordinator with its production driver (internal/checkpointing's Driver,
// stepped: its I/O runs as coroutines on this goroutine, see driver.go).
// The job loop and the TaskManager carry out their state machines' effects
// the way internal/jobmanager and internal/taskmanager do, with the network
// and the clock simulated. The
// subtasks are simulated: sources that run for a while and end (bounded
// jobs) or not, barriers that travel downstream, acks, sinks that commit
// on notifications.
//
// Everything is decided by one seed: a run of seed S replays bit for bit
// (its trace hashes to the same value), so a failing seed is a bug report.
// After every step the invariants are checked (see check.go); once the
// faults stop, every bounded job must end and every unbounded job must
// complete a checkpoint within a bounded simulated time.
package sim

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// epoch is where simulated time starts.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is the simulated clock every state machine reads.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// event is something that happens at a simulated time; seq breaks ties in
// the order events were scheduled.
type event struct {
	at   time.Time
	seq  uint64
	name string
	f    func()
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// world is the simulation: clock, event queue, randomness, network.
type world struct {
	cfg   Config
	rng   *rand.Rand
	clock *clock
	q     queue
	seq   uint64
	steps int
	trace []string
	hash  uint64
	// faults counts the faults injected, by kind.
	faults map[string]int
	// restorableChecked and restorableGraph are the newest stored
	// checkpoint and the stored graph checkRestorable last checked.
	restorableChecked int64
	restorableGraph   *weirv1.JobGraph
	// quiet: faults stopped at this time (zero while they go on).
	quiet time.Time
	// partitioned hosts cannot reach the JobManager, nor it them.
	partitioned map[string]bool
	// up tells a host's incarnation; a message to or from an earlier
	// incarnation is lost with it.
	incarnation map[string]int
	down        map[string]bool
	// channels is the last delivery time per data channel (FIFO).
	channels map[string]time.Time
	// files is checkpoint storage.
	files   *files
	failure error
	sim     *simulation
	// procs are the coroutines of the Driver's I/O that have not ended,
	// in the order they started.
	procs []*proc
}

func newWorld(cfg Config) *world {
	return &world{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		clock: &clock{now: epoch}, faults: map[string]int{},
		partitioned: map[string]bool{}, incarnation: map[string]int{}, down: map[string]bool{},
		channels: map[string]time.Time{}, files: newFiles(),
	}
}

func (w *world) now() time.Time { return w.clock.now }

// at schedules f at t.
func (w *world) at(t time.Time, name string, f func()) {
	w.seq++
	heap.Push(&w.q, &event{at: t, seq: w.seq, name: name, f: f})
}

func (w *world) after(d time.Duration, name string, f func()) { w.at(w.now().Add(d), name, f) }

// logf records a line of the trace: every line goes into the run's hash,
// the last ones are kept for the report of a failing seed.
func (w *world) logf(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", w.now().Sub(epoch).Seconds()) + fmt.Sprintf(format, args...)
	h := fnv.New64a()
	h.Write([]byte(line))
	w.hash = w.hash*31 + h.Sum64()
	w.trace = append(w.trace, line)
	if !w.cfg.Trace && len(w.trace) > 400 {
		w.trace = w.trace[len(w.trace)-200:]
	}
}

func (w *world) fault(kind string, format string, args ...any) {
	w.faults[kind]++
	w.logf("FAULT %s: "+format, append([]any{kind}, args...)...)
}

// faulty reports whether faults may still be injected.
func (w *world) faulty() bool { return w.quiet.IsZero() }

// chance draws true with probability p while faults go on.
func (w *world) chance(p float64) bool { return w.faulty() && w.rng.Float64() < p }

// between draws a duration in [lo, hi).
func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

// send delivers f at host to after a network delay, unless the message is
// lost: a partition between the two, a host down or restarted since, or a
// drop. It may also arrive twice. from and to are host names (jm1, jm2,
// … are JobManagers).
func (w *world) send(from, to, name string, f func()) {
	fromInc, toInc := w.incarnation[from], w.incarnation[to]
	deliver := func(dup bool) {
		d := w.between(100*time.Microsecond, 3*time.Millisecond)
		if w.chance(w.cfg.SlowP) {
			d = w.between(50*time.Millisecond, 2500*time.Millisecond)
		}
		w.after(d, name, func() {
			switch {
			case w.down[to] || w.incarnation[to] != toInc:
				w.logf("lost %s → %s: %s (host down)", from, to, name)
			case w.incarnation[from] != fromInc:
				w.logf("lost %s → %s: %s (sender gone)", from, to, name)
			case w.partitioned[from] || w.partitioned[to]:
				w.logf("lost %s → %s: %s (partition)", from, to, name)
			default:
				if dup {
					w.logf("%s → %s: %s (again)", from, to, name)
				}
				f()
			}
		})
	}
	if w.chance(w.cfg.DropP) {
		w.fault("drop", "%s → %s: %s", from, to, name)
		return
	}
	deliver(false)
	if w.chance(w.cfg.DupP) {
		w.fault("duplicate", "%s → %s: %s", from, to, name)
		deliver(true)
	}
}

// pipe delivers f over a data channel between subtasks: in order, never
// dropped or duplicated (a channel is a stream); lost with either host.
// A channel cut by a partition breaks: the consumer's f does not run, and
// the channel's subtasks fail over with their region.
func (w *world) pipe(from, to, channel, name string, f func()) {
	fromInc, toInc := w.incarnation[from], w.incarnation[to]
	at := w.now().Add(w.between(50*time.Microsecond, time.Millisecond))
	if last := w.channels[channel]; !at.After(last) {
		at = last.Add(time.Microsecond)
	}
	w.channels[channel] = at
	w.at(at, name+" "+channel, func() {
		if w.down[from] || w.down[to] || w.incarnation[from] != fromInc || w.incarnation[to] != toInc {
			return
		}
		if (w.partitioned[from] || w.partitioned[to]) && from != to {
			w.logf("channel %s broken by a partition", channel)
			w.sim.broken(to, channel)
			return
		}
		f()
	})
}

// callWait is a request whose answer the callee sends when it has it:
// handle runs at to and calls reply (once) with what the answer carries,
// run back at from; timeout fires instead when no answer came in time.
func (w *world) callWait(from, to, name string, timeout time.Duration, handle func(reply func(answer func())), timedOut func()) {
	done := false
	w.after(timeout, name+" timeout", func() {
		if !done {
			done = true
			timedOut()
		}
	})
	w.send(from, to, name, func() {
		handle(func(answer func()) {
			w.send(to, from, name+" answer", func() {
				if !done {
					done = true
					answer()
				}
			})
		})
	})
}

// call is a request and its answer: handle runs at to and returns what
// the answer carries, as a function run back at from; timeout fires
// instead when no answer came in time. Exactly one of the two runs.
func (w *world) call(from, to, name string, timeout time.Duration, handle func() func(), timedOut func()) {
	w.callWait(from, to, name, timeout, func(reply func(func())) { reply(handle()) }, timedOut)
}

// run pops events until the queue is empty, until, or a failure.
func (w *world) run(until time.Time, step func()) {
	for w.failure == nil && len(w.q) > 0 {
		e := w.q[0]
		if e.at.After(until) {
			w.clock.now = until
			return
		}
		heap.Pop(&w.q)
		w.clock.now = e.at
		w.steps++
		e.f()
		step()
	}
}

func (w *world) fail(format string, args ...any) {
	if w.failure == nil {
		w.failure = fmt.Errorf(format, args...)
		w.logf("VIOLATION: %v", w.failure)
	}
}

// tail is the end of the trace, for a failure report.
func (w *world) tail(n int) string {
	t := w.trace
	if len(t) > n {
		t = t[len(t)-n:]
	}
	return strings.Join(t, "\n")
}
