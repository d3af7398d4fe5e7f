package checkpointing

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/ha"
)

// ioQueue is an Executor that runs nothing until the test says so.
type ioQueue struct {
	ctx []context.Context
	ios []func(context.Context)
}

func (q *ioQueue) Go(ctx context.Context, io func(context.Context)) {
	q.ctx, q.ios = append(q.ctx, ctx), append(q.ios, io)
}

// drain runs the I/O queued, and what that queues, until none is left.
func (q *ioQueue) drain() {
	for len(q.ios) > 0 {
		ctx, io := q.ctx[0], q.ios[0]
		q.ctx, q.ios = q.ctx[1:], q.ios[1:]
		io(ctx)
	}
}

// TestSteppedDriver: with an Executor the Driver has no goroutine of its
// own: its owner's calls run the state machine there and then, and its
// I/O runs only when the executor runs it (the simulator's way of driving
// the daemon's own dispatch).
func TestSteppedDriver(t *testing.T) {
	rec := newRecorder()
	q := &ioQueue{}
	e := &driverEnv{t: t, rec: rec, tasks: testTasks()}
	e.d = New(testConfig(), Deps{
		Executor: q, Clock: newTimerClock(), Rand: rand.New(constSource(math.MaxUint64)),
		Counter: &counter{rec: rec, inner: ha.NewStandaloneCounter(0)}, Store: ha.NewStandaloneStore(1),
		Storage: &dirStorage{root: t.TempDir(), rec: rec}, Tasks: &gateway{rec: rec},
		Logger: slog.New(slog.DiscardHandler),
	})
	defer e.d.Close()
	e.d.Start(e.tasks)
	var results []Result
	e.d.Request(coordinator.Manual, "", func(r Result) { results = append(results, r) })
	if got := rec.all(); len(got) != 0 || len(q.ios) != 1 {
		t.Fatalf("before the executor ran: recorded %q, %d I/O queued; want nothing done and the counter's call queued", got, len(q.ios))
	}
	q.drain() // the ID, the location, the trigger
	for _, task := range e.tasks {
		if task.Source && !rec.has("trigger "+fmtAttempt(task.Attempt)+" id=1 type=CHECKPOINT") {
			t.Fatalf("checkpoint 1 not triggered on source %s; recorded %q", fmtAttempt(task.Attempt), rec.all())
		}
	}
	dir := t.TempDir()
	for _, task := range e.tasks {
		if r, known := e.d.Acknowledge(ackOf(t, task, 1, dir)); !known || r != coordinator.AckSuccess {
			t.Fatalf("ack of %s: %v (known %t), want SUCCESS known", fmtAttempt(task.Attempt), r, known)
		}
	}
	if len(results) != 0 || e.d.Finalizations() != 1 {
		t.Fatalf("acked, not finalized: results %v, %d finalizations; want none yet and one in flight", results, e.d.Finalizations())
	}
	q.drain() // the metadata, the store, the notifications
	if len(results) != 1 || results[0].ID != 1 || results[0].Err != nil || e.d.Finalizations() != 0 {
		t.Fatalf("results %+v, %d finalizations; want checkpoint 1 completed", results, e.d.Finalizations())
	}
	rec.before(t, "metadata chk-1/_metadata", "complete sink/0 id=1 last-subsumed=0")
}
