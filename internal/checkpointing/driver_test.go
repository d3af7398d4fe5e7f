package checkpointing

// Driver tests: the Driver on real goroutines, with fakes for everything it
// talks to. A fake TimerClock (After returns a channel the test fires by
// moving the clock), a TaskGateway that records every call in order and can
// block or fail on demand, operator coordinators and master hooks that
// record what they are asked, the standalone (in-memory) counter and
// completed store, and real checkpoint storage in t.TempDir() through
// internal/storage. Every wait has a timeout; nothing sleeps to wait for a
// condition. Each test ends with goleak.VerifyNone after Close (TestMain
// checks the whole package too).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/coordinator"

	"go.uber.org/goleak"

	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// waitTimeout bounds every wait for something the driver does on another
// goroutine.
const waitTimeout = 10 * time.Second

// recorder is an ordered log shared by every fake, so the tests can check
// the order of things across them (an event delivered after a trigger RPC
// returned).
type recorder struct {
	mu      sync.Mutex
	entries []string
	changed chan struct{} // closed and replaced on every add
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, fmt.Sprintf(format, args...))
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries)
}

// index is the position of entry e, -1 if absent.
func (r *recorder) index(e string) int { return slices.Index(r.all(), e) }

func (r *recorder) has(e string) bool { return r.index(e) >= 0 }

// waitFor waits until every entry is recorded.
func (r *recorder) waitFor(t *testing.T, entries ...string) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		r.mu.Lock()
		missing := ""
		for _, e := range entries {
			if !slices.Contains(r.entries, e) {
				missing = e
				break
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if missing == "" {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %q; recorded:\n  %s", missing, strings.Join(r.all(), "\n  "))
		}
	}
}

// before fails the test unless entry a was recorded before entry b.
func (r *recorder) before(t *testing.T, a, b string) {
	t.Helper()
	ia, ib := r.index(a), r.index(b)
	if ia < 0 || ib < 0 || ia > ib {
		t.Errorf("want %q (at %d) before %q (at %d); recorded:\n  %s", a, ia, b, ib, strings.Join(r.all(), "\n  "))
	}
}

// timerClock is a TimerClock that only moves when the test advances it;
// Advance fires the timers that are then due.
type timerClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []fakeTimer
	changed chan struct{}
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newTimerClock() *timerClock { return &timerClock{now: epoch, changed: make(chan struct{})} }

func (c *timerClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *timerClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the clock by d and fires every timer due by then.
func (c *timerClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			keep = append(keep, tm)
			continue
		}
		tm.ch <- c.now
	}
	c.timers = keep
}

// waitArmed waits until the driver armed a timer due at at (it arms one
// whenever the deadline changes).
func (c *timerClock) waitArmed(t *testing.T, at time.Time) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		c.mu.Lock()
		armed := slices.ContainsFunc(c.timers, func(tm fakeTimer) bool { return tm.at.Equal(at) })
		ch := c.changed
		c.mu.Unlock()
		if armed {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for a timer at +%s", at.Sub(epoch))
		}
	}
}

// gateway is a recording TaskGateway. onTrigger, when set, runs inside
// TriggerCheckpoint: it can block (honouring ctx, so Close returns) or fail.
type gateway struct {
	rec       *recorder
	mu        sync.Mutex
	onTrigger func(ctx context.Context, task string, id int64) error
}

func (g *gateway) setOnTrigger(f func(ctx context.Context, task string, id int64) error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onTrigger = f
}

// TriggerCheckpoint records each subtask of the batch as its own trigger,
// concurrently, as the subtasks of one call may run on several
// TaskManagers.
func (g *gateway) TriggerCheckpoint(ctx context.Context, tasks []*weirv1.ExecutionAttemptID, id int64, _ time.Time, opts *weirv1.CheckpointOptions) error {
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, task := range tasks {
		wg.Go(func() {
			g.rec.add("trigger %s id=%d type=%s", fmtAttempt(task), id, shortType(opts.GetType()))
			g.mu.Lock()
			f := g.onTrigger
			g.mu.Unlock()
			if f != nil {
				errs[i] = f(ctx, fmtAttempt(task), id)
			}
			g.rec.add("trigger-returned %s id=%d", fmtAttempt(task), id)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (g *gateway) NotifyCheckpointComplete(_ context.Context, tasks []*weirv1.ExecutionAttemptID, id, lastSubsumed int64, final bool) error {
	for _, task := range tasks {
		g.rec.add("complete %s id=%d last-subsumed=%d", fmtAttempt(task), id, lastSubsumed)
		if final {
			g.rec.add("final %s id=%d", fmtAttempt(task), id)
		}
	}
	return nil
}

func (g *gateway) NotifyCheckpointAborted(_ context.Context, tasks []*weirv1.ExecutionAttemptID, id int64) error {
	for _, task := range tasks {
		g.rec.add("aborted %s id=%d", fmtAttempt(task), id)
	}
	return nil
}

// blockUntil makes an onTrigger that blocks until release is closed (or the
// driver closes).
func blockUntil(release <-chan struct{}) func(ctx context.Context, task string, id int64) error {
	return func(ctx context.Context, task string, id int64) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dirStorage is the coordinator's Storage on a real directory, through the
// functions of internal/storage. It records what it did, once done.
type dirStorage struct {
	root string
	rec  *recorder
}

func (s *dirStorage) rel(path string) string {
	if r, err := filepath.Rel(s.root, path); err == nil {
		return r
	}
	return path
}

func (s *dirStorage) InitLocation(_ context.Context, id int64, savepoint bool, target string) (string, error) {
	dir := filepath.Join(s.root, fmt.Sprintf("chk-%d", id))
	if savepoint && target != "" {
		dir = filepath.Join(target, fmt.Sprintf("savepoint-%d", id))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	s.rec.add("location %s", s.rel(dir))
	return dir, nil
}

// ReserveMetadata is not recorded: it runs beside the trigger, in no
// fixed order with the records around it.
func (s *dirStorage) ReserveMetadata(_ context.Context, dir string) error {
	return storage.ReserveMetadata(dir)
}

func (s *dirStorage) WriteMetadata(_ context.Context, dir string, md *weirv1.CheckpointMetadata, reserved bool) (string, error) {
	write := storage.WriteMetadata
	if reserved {
		write = storage.WriteReservedMetadata
	}
	path, err := write(dir, md)
	if err == nil {
		s.rec.add("metadata %s", s.rel(path))
	}
	return path, err
}

func (s *dirStorage) Discard(_ context.Context, dir string) error {
	err := storage.Discard(dir)
	s.rec.add("discard %s", s.rel(dir))
	return err
}

func (s *dirStorage) DiscardShared(_ context.Context, paths []string) error {
	var errs []error
	for _, p := range paths {
		errs = append(errs, storage.Delete(p))
	}
	return errors.Join(errs...)
}

func (s *dirStorage) DiscardStates(_ context.Context, states []*weirv1.SubtaskState) error {
	var errs []error
	for _, st := range states {
		errs = append(errs, storage.DiscardHandles(st))
		s.rec.add("discard-state %s", s.rel(st.GetKeyedState().GetPath()))
	}
	return errors.Join(errs...)
}

// counter wraps the standalone counter; calls listed in block wait until
// their channel is closed (or the driver closes).
type counter struct {
	rec   *recorder
	inner *ha.StandaloneCounter
	mu    sync.Mutex
	calls int
	block map[int]chan struct{}
}

func (c *counter) Next(ctx context.Context) (int64, error) {
	c.mu.Lock()
	c.calls++
	n, ch := c.calls, c.block[c.calls]
	c.mu.Unlock()
	c.rec.add("counter call %d", n)
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return c.inner.Next(ctx)
}

// opCoordinator is a recording OperatorCoordinator. onSnapshot, when set,
// runs inside CheckpointCoordinator, after the snapshot was taken.
type opCoordinator struct {
	name       string
	rec        *recorder
	valve      *EventValve
	mu         sync.Mutex
	onSnapshot func(ctx context.Context, c *opCoordinator, id int64)
}

func (c *opCoordinator) Name() string { return c.name }

func (c *opCoordinator) CheckpointCoordinator(ctx context.Context, id int64) ([]byte, error) {
	c.rec.add("snapshot %s id=%d", c.name, id)
	c.mu.Lock()
	f := c.onSnapshot
	c.mu.Unlock()
	if f != nil {
		f(ctx, c, id)
	}
	return fmt.Appendf(nil, "%s@%d", c.name, id), nil
}

func (c *opCoordinator) NotifyCheckpointComplete(id int64) {
	c.rec.add("coordinator-complete %s id=%d", c.name, id)
}

func (c *opCoordinator) NotifyCheckpointAborted(id int64) {
	c.rec.add("coordinator-aborted %s id=%d", c.name, id)
}

func (c *opCoordinator) ResetToCheckpoint(id int64, state []byte) error {
	c.rec.add("reset %s id=%d state=%s", c.name, id, state)
	return nil
}

// sendEvent sends an event to the tasks through the coordinator's valve;
// its delivery is recorded.
func (c *opCoordinator) sendEvent(name string) {
	c.valve.Send(func() { c.rec.add("event %s delivered", name) })
}

func (c *opCoordinator) setOnSnapshot(f func(ctx context.Context, c *opCoordinator, id int64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onSnapshot = f
}

func (c *opCoordinator) holder() *CoordinatorHolder {
	return &CoordinatorHolder{Coordinator: c, Valve: c.valve}
}

// masterHook is a recording MasterHook; with fail set, its snapshots fail.
type masterHook struct {
	name string
	rec  *recorder
	fail error
}

func (h *masterHook) Name() string { return h.name }

func (h *masterHook) TriggerCheckpoint(_ context.Context, id int64, _ time.Time) ([]byte, error) {
	h.rec.add("hook %s id=%d", h.name, id)
	if h.fail != nil {
		return nil, h.fail
	}
	return fmt.Appendf(nil, "%s@%d", h.name, id), nil
}

func (h *masterHook) RestoreCheckpoint(_ context.Context, id int64, state []byte) error {
	h.rec.add("restore-hook %s id=%d state=%s", h.name, id, state)
	return nil
}

// driverEnv is a running Driver with its fakes.
type driverEnv struct {
	t       *testing.T
	clock   *timerClock
	rec     *recorder
	gw      *gateway
	storage *dirStorage
	counter *counter
	d       *Driver
	tasks   []coordinator.Task
}

// testTasks are two sources and a sink.
func testTasks() []coordinator.Task {
	at := func(v string, i int32) *weirv1.ExecutionAttemptID {
		return &weirv1.ExecutionAttemptID{JobId: "job-1", Vertex: v, SubtaskIndex: i}
	}
	return []coordinator.Task{{Attempt: at("src", 0), Source: true}, {Attempt: at("src", 1), Source: true}, {Attempt: at("sink", 0)}}
}

func testConfig() coordinator.Config {
	return coordinator.Config{JobID: "job-1", Timeout: 10 * time.Second, MaxConcurrent: 1, Tolerable: -1, MaxParallelism: 128,
		Options: &weirv1.CheckpointOptions{ExactlyOnce: true}}
}

// newDriverEnv starts a driver whose fakes record into rec (nil: a new
// recorder); edit adjusts its Deps. Cleanup closes it and checks that no
// goroutine outlives it.
func newDriverEnv(t *testing.T, cfg coordinator.Config, rec *recorder, edit func(*Deps)) *driverEnv {
	if rec == nil {
		rec = newRecorder()
	}
	e := &driverEnv{
		t: t, clock: newTimerClock(), rec: rec, gw: &gateway{rec: rec},
		storage: &dirStorage{root: t.TempDir(), rec: rec},
		counter: &counter{rec: rec, inner: ha.NewStandaloneCounter(0), block: map[int]chan struct{}{}},
		tasks:   testTasks(),
	}
	deps := Deps{
		Clock: e.clock, Rand: rand.New(constSource(math.MaxUint64)),
		Counter: e.counter, Store: ha.NewStandaloneStore(1), Storage: e.storage, Tasks: e.gw,
		FailJob: func(cause error) { rec.add("fail-job %v", cause) },
		Metrics: NewMetrics(nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&deps)
	}
	e.d = New(cfg, deps)
	go e.d.Run()
	t.Cleanup(func() {
		e.d.Close()
		goleak.VerifyNone(t)
	})
	return e
}

// trigger requests a checkpoint on another goroutine; the result comes on
// the channel.
func (e *driverEnv) trigger(kind coordinator.RequestKind, target string) <-chan Result {
	ch := make(chan Result, 1)
	go func() { ch <- e.d.Trigger(context.Background(), kind, target) }()
	return ch
}

func waitResult(t *testing.T, ch <-chan Result) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for the request's result")
		return Result{}
	}
}

// wantFailure checks that r failed for reason.
func wantFailure(t *testing.T, r Result, reason weirv1.CheckpointFailureReason) {
	t.Helper()
	var f *coordinator.Failure
	if !errors.As(r.Err, &f) || f.Reason != reason {
		t.Fatalf("result %+v: want a failure with reason %s", r, reason)
	}
}

// ack acknowledges checkpoint id for task with a state file written into
// dir, as a subtask would; it returns the file's path.
func (e *driverEnv) ack(task coordinator.Task, id int64, dir string) string {
	e.t.Helper()
	req := ackOf(e.t, task, id, dir)
	e.d.Acknowledge(req)
	return req.GetState().GetKeyedState().GetPath()
}

// ackOf is task's ack of checkpoint id, with a state file written into dir.
func ackOf(t *testing.T, task coordinator.Task, id int64, dir string) *weirv1.AcknowledgeCheckpointRequest {
	t.Helper()
	a := task.Attempt
	path := filepath.Join(dir, fmt.Sprintf("%s-%d-chk-%d.state", a.GetVertex(), a.GetSubtaskIndex(), id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("state"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &weirv1.AcknowledgeCheckpointRequest{
		Attempt: a, CheckpointId: id,
		State: &weirv1.SubtaskState{
			Vertex: a.GetVertex(), SubtaskIndex: a.GetSubtaskIndex(),
			KeyedState: &weirv1.StateHandle{Path: path, Size: 5}, StateSize: 5, CheckpointedSize: 5,
		},
		Metrics: &weirv1.CheckpointMetrics{SyncDurationMs: 1, AsyncDurationMs: 2},
	}
}

func (e *driverEnv) ackAll(id int64, dir string) {
	e.t.Helper()
	for _, task := range e.tasks {
		e.ack(task, id, dir)
	}
}

func (e *driverEnv) chk(id int64) string {
	return filepath.Join(e.storage.root, fmt.Sprintf("chk-%d", id))
}

// triggered waits until every source was sent TriggerCheckpoint for id.
func (e *driverEnv) triggered(id int64, typ string) {
	e.t.Helper()
	e.rec.waitFor(e.t, fmt.Sprintf("trigger src/0 id=%d type=%s", id, typ), fmt.Sprintf("trigger src/1 id=%d type=%s", id, typ))
}

// notified waits until every task was told that id completed.
func (e *driverEnv) notified(id, lastSubsumed int64) {
	e.t.Helper()
	for _, task := range e.tasks {
		e.rec.waitFor(e.t, fmt.Sprintf("complete %s id=%d last-subsumed=%d", fmtAttempt(task.Attempt), id, lastSubsumed))
	}
}

// aborted waits until every task was told that id aborted.
func (e *driverEnv) aborted(id int64) {
	e.t.Helper()
	for _, task := range e.tasks {
		e.rec.waitFor(e.t, fmt.Sprintf("aborted %s id=%d", fmtAttempt(task.Attempt), id))
	}
}

func wantGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: want it gone, stat says %v", path, err)
	}
}

// TestDriverPeriodicCheckpoint runs a periodic checkpoint end to end: the
// timer fires, the sources are triggered, the acks come in through
// Driver.Acknowledge, the metadata is written to storage, then every task
// is notified. A manual checkpoint then returns its result to Trigger and
// subsumes the first one in the store (retained 1).
func TestDriverPeriodicCheckpoint(t *testing.T) {
	cfg := testConfig()
	cfg.Interval = time.Second
	e := newDriverEnv(t, cfg, nil, nil)
	e.d.Start(e.tasks)

	// rand=max: the first trigger comes after exactly one interval.
	e.clock.waitArmed(t, epoch.Add(time.Second))
	if e.rec.has("counter call 1") {
		t.Fatal("triggered before the timer fired")
	}
	e.clock.Advance(time.Second)
	e.triggered(1, "CHECKPOINT")
	e.rec.before(t, "counter call 1", "location chk-1")
	e.rec.before(t, "location chk-1", "trigger src/0 id=1 type=CHECKPOINT")
	if e.rec.has("trigger sink/0 id=1 type=CHECKPOINT") {
		t.Error("a non-source task was triggered")
	}

	e.ackAll(1, e.chk(1))
	e.notified(1, 0)
	e.rec.before(t, "metadata chk-1/_metadata", "complete src/0 id=1 last-subsumed=0")
	md, err := storage.ReadMetadata(filepath.Join(e.chk(1), storage.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if md.GetCheckpointId() != 1 || md.GetJobId() != "job-1" || len(md.GetSubtasks()) != 3 ||
		md.GetType() != weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT {
		t.Errorf("metadata: %v", md)
	}
	st := e.d.Stats()
	if st.GetCounts().GetCompleted() != 1 || st.GetLatestCompleted().GetId() != 1 ||
		st.GetLatestCompleted().GetExternalPath() != filepath.Join(e.chk(1), storage.MetadataFile) {
		t.Errorf("stats: %v", st)
	}

	res := e.trigger(coordinator.Manual, "")
	e.triggered(2, "CHECKPOINT")
	e.ackAll(2, e.chk(2))
	r := waitResult(t, res)
	if r.Err != nil || r.ID != 2 || r.Path != filepath.Join(e.chk(2), storage.MetadataFile) {
		t.Fatalf("manual checkpoint: %+v", r)
	}
	// The store keeps one checkpoint: 1 is subsumed and its files go, and
	// the tasks learn it with the notification of 2.
	e.notified(2, 1)
	e.rec.waitFor(t, "discard chk-1")
	wantGone(t, e.chk(1))
	if _, err := os.Stat(filepath.Join(e.chk(2), storage.MetadataFile)); err != nil {
		t.Error(err)
	}
}

// TestDriverCoordinatorEventsHeldUntilTriggerSent: an operator coordinator
// that sends an event from inside CheckpointCoordinator (after its
// snapshot) must not have it delivered before every TriggerCheckpoint call
// returned, or a task could see the event before the checkpoint's barrier.
// It also checks the chain's order and that the coordinator's and the
// master hook's states land in the metadata.
func TestDriverCoordinatorEventsHeldUntilTriggerSent(t *testing.T) {
	rec := newRecorder()
	enum := &opCoordinator{name: "enumerator", rec: rec, valve: &EventValve{}}
	enum.setOnSnapshot(func(_ context.Context, c *opCoordinator, id int64) {
		c.sendEvent(fmt.Sprintf("split-after-%d", id))
	})
	hook := &masterHook{name: "offsets", rec: rec}
	e := newDriverEnv(t, testConfig(), rec, func(d *Deps) {
		d.Coordinators = []*CoordinatorHolder{enum.holder()}
		d.Hooks = []MasterHook{hook}
	})
	release := make(chan struct{})
	e.gw.setOnTrigger(blockUntil(release))
	e.d.Start(e.tasks)

	res := e.trigger(coordinator.Manual, "")
	e.triggered(1, "CHECKPOINT")
	e.rec.before(t, "counter call 1", "location chk-1")
	e.rec.before(t, "location chk-1", "snapshot enumerator id=1")
	e.rec.before(t, "snapshot enumerator id=1", "hook offsets id=1")
	e.rec.before(t, "hook offsets id=1", "trigger src/0 id=1 type=CHECKPOINT")
	e.rec.before(t, "hook offsets id=1", "trigger src/1 id=1 type=CHECKPOINT")

	// Both trigger RPCs are in flight: the event is held, and so is one the
	// coordinator sends now.
	if e.rec.has("event split-after-1 delivered") {
		t.Fatal("the coordinator's event was delivered before the trigger RPCs returned")
	}
	enum.sendEvent("meanwhile")
	if e.rec.has("event meanwhile delivered") {
		t.Fatal("an event sent between snapshot and trigger went out at once")
	}

	close(release)
	e.rec.waitFor(t, "event split-after-1 delivered", "event meanwhile delivered")
	for _, src := range []string{"src/0", "src/1"} {
		e.rec.before(t, "trigger-returned "+src+" id=1", "event split-after-1 delivered")
	}
	e.rec.before(t, "event split-after-1 delivered", "event meanwhile delivered")
	// Open again: events go out at once.
	enum.sendEvent("after")
	if !e.rec.has("event after delivered") {
		t.Error("the valve stayed closed after the trigger")
	}

	e.ackAll(1, e.chk(1))
	if r := waitResult(t, res); r.Err != nil || r.ID != 1 {
		t.Fatalf("result: %+v", r)
	}
	e.notified(1, 0)
	e.rec.waitFor(t, "coordinator-complete enumerator id=1")
	md, err := storage.ReadMetadata(filepath.Join(e.chk(1), storage.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if cs := md.GetOperatorCoordinators(); len(cs) != 1 || cs[0].GetName() != "enumerator" || string(cs[0].GetData()) != "enumerator@1" {
		t.Errorf("coordinator states in the metadata: %v", cs)
	}
	if hs := md.GetMasterStates(); len(hs) != 1 || hs[0].GetName() != "offsets" || string(hs[0].GetData()) != "offsets@1" {
		t.Errorf("master states in the metadata: %v", hs)
	}
}

// TestDriverTriggerFailureAborts: a failed trigger RPC aborts the
// checkpoint: every task is told, the location directory is removed, the
// coordinator's valve is open again, and an ack that still comes has its
// state discarded.
func TestDriverTriggerFailureAborts(t *testing.T) {
	rec := newRecorder()
	enum := &opCoordinator{name: "enumerator", rec: rec, valve: &EventValve{}}
	enum.setOnSnapshot(func(_ context.Context, c *opCoordinator, id int64) {
		c.sendEvent(fmt.Sprintf("split-after-%d", id))
	})
	e := newDriverEnv(t, testConfig(), rec, func(d *Deps) { d.Coordinators = []*CoordinatorHolder{enum.holder()} })
	e.gw.setOnTrigger(func(_ context.Context, task string, _ int64) error {
		if task == "src/1" {
			return errors.New("connection refused")
		}
		return nil
	})
	e.d.Start(e.tasks)

	r := waitResult(t, e.trigger(coordinator.Manual, ""))
	wantFailure(t, r, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE)
	if r.ID != 1 {
		t.Errorf("failed checkpoint ID %d, want 1", r.ID)
	}
	e.aborted(1)
	e.rec.waitFor(t, "coordinator-aborted enumerator id=1", "discard chk-1", "event split-after-1 delivered")
	wantGone(t, e.chk(1))
	enum.sendEvent("after")
	if !e.rec.has("event after delivered") {
		t.Error("the valve is still closed after the abort")
	}

	// src/0 had been triggered: its ack comes after the abort.
	late := e.ack(e.tasks[0], 1, filepath.Join(e.storage.root, "late"))
	e.rec.waitFor(t, "discard-state late/src-0-chk-1.state")
	wantGone(t, late)
	if st := e.d.Stats(); st.GetCounts().GetFailed() != 1 || st.GetCounts().GetInProgress() != 0 {
		t.Errorf("stats: %v", st.GetCounts())
	}
}

// TestDriverHookFailureReleases: a master hook fails after the operator
// coordinator snapshotted (its valve closed, an event held): the request
// fails, no trigger RPC goes out, the location directory is removed and the
// NotifyAborted re-opens the valve, delivering the held event.
func TestDriverHookFailureReleases(t *testing.T) {
	rec := newRecorder()
	enum := &opCoordinator{name: "enumerator", rec: rec, valve: &EventValve{}}
	enum.setOnSnapshot(func(_ context.Context, c *opCoordinator, id int64) {
		c.sendEvent(fmt.Sprintf("split-after-%d", id))
	})
	hook := &masterHook{name: "offsets", rec: rec, fail: errors.New("broker unavailable")}
	e := newDriverEnv(t, testConfig(), rec, func(d *Deps) {
		d.Coordinators = []*CoordinatorHolder{enum.holder()}
		d.Hooks = []MasterHook{hook}
	})
	e.d.Start(e.tasks)

	r := waitResult(t, e.trigger(coordinator.Manual, ""))
	wantFailure(t, r, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE)
	e.aborted(1)
	e.rec.waitFor(t, "coordinator-aborted enumerator id=1", "discard chk-1", "event split-after-1 delivered")
	e.rec.before(t, "hook offsets id=1", "event split-after-1 delivered")
	wantGone(t, e.chk(1))
	for _, e := range e.rec.all() {
		if strings.HasPrefix(e, "trigger ") {
			t.Errorf("a trigger RPC went out: %s", e)
		}
	}
}

// TestDriverAckAfterClose: an ack that arrives once the driver closed has
// no checkpoint to go to; its state files are deleted right away. (post
// used to pick at random between the closed loop's buffered channel and
// Done, so about half of these leaked.)
func TestDriverAckAfterClose(t *testing.T) {
	e := newDriverEnv(t, testConfig(), nil, nil)
	e.d.Start(e.tasks)
	e.d.Close()
	dir := filepath.Join(e.storage.root, "late")
	for id := int64(1); id <= 50; id++ {
		path := e.ack(e.tasks[2], id, dir)
		wantGone(t, path)
	}
}

// TestDriverStopAbortsInFlight: Stop aborts every checkpoint in flight —
// here a checkpoint and a savepoint (forced past max-concurrent), both
// triggered, and a third request still waiting for its ID — and each
// request waiting in Trigger gets the failure with Stop's reason.
func TestDriverStopAbortsInFlight(t *testing.T) {
	e := newDriverEnv(t, testConfig(), nil, nil)
	releaseCounter := make(chan struct{})
	e.counter.block[3] = releaseCounter
	defer close(releaseCounter)
	e.d.Start(e.tasks)

	ckpt := e.trigger(coordinator.Manual, "")
	e.triggered(1, "CHECKPOINT")
	spDir := filepath.Join(e.storage.root, "sp")
	sp := e.trigger(coordinator.Savepoint, spDir)
	e.triggered(2, "SAVEPOINT")
	third := e.trigger(coordinator.Savepoint, spDir)
	e.rec.waitFor(t, "counter call 3")

	e.d.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_FAILOVER_REGION)
	for _, ch := range []<-chan Result{ckpt, sp, third} {
		wantFailure(t, waitResult(t, ch), weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_FAILOVER_REGION)
	}
	e.aborted(1)
	e.aborted(2)
	e.rec.waitFor(t, "discard chk-1", "discard sp/savepoint-2")
	wantGone(t, e.chk(1))
	wantGone(t, filepath.Join(spDir, "savepoint-2"))

	// Stopped: new requests fail at once.
	wantFailure(t, waitResult(t, e.trigger(coordinator.Manual, "")), weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_NOT_RUNNING)
}

// TestDriverCloseWithWaitingTrigger: Close with a request waiting in
// Trigger (its trigger RPC hangs) returns ErrShutDown to it; Close cancels
// the hanging I/O, and later requests get ErrShutDown too.
func TestDriverCloseWithWaitingTrigger(t *testing.T) {
	e := newDriverEnv(t, testConfig(), nil, nil)
	e.gw.setOnTrigger(blockUntil(nil))
	e.d.Start(e.tasks)
	res := e.trigger(coordinator.Manual, "")
	e.triggered(1, "CHECKPOINT")

	e.d.Close()
	if r := waitResult(t, res); !errors.Is(r.Err, ErrShutDown) {
		t.Fatalf("waiting Trigger got %+v, want ErrShutDown", r)
	}
	if r := e.d.Trigger(context.Background(), coordinator.Manual, ""); !errors.Is(r.Err, ErrShutDown) {
		t.Errorf("Trigger after Close: %+v, want ErrShutDown", r)
	}
	if r := e.d.StopWithSavepoint(context.Background(), "", false); !errors.Is(r.Err, ErrShutDown) {
		t.Errorf("StopWithSavepoint after Close: %+v, want ErrShutDown", r)
	}
	if st := e.d.Stats(); st.GetCounts().GetTotal() != 0 {
		t.Errorf("Stats after Close: %v", st)
	}
}

// TestDriverValveHeldAcrossOtherAbort: the end of another checkpoint must
// not release events held back for this one. Checkpoint 2's coordinator
// snapshot sent an event and is still running when checkpoint 1 (pending,
// max-concurrent=2) is declined: the abort's NotifyAborted used to open the
// valve for everybody, so the event reached the tasks before checkpoint 2's
// barrier.
func TestDriverValveHeldAcrossOtherAbort(t *testing.T) {
	rec := newRecorder()
	enum := &opCoordinator{name: "enumerator", rec: rec, valve: &EventValve{}}
	proceed := make(chan struct{})
	enum.setOnSnapshot(func(ctx context.Context, c *opCoordinator, id int64) {
		if id != 2 {
			return
		}
		c.sendEvent("split-after-2")
		c.rec.add("sent split-after-2")
		select {
		case <-proceed:
		case <-ctx.Done():
		}
	})
	cfg := testConfig()
	cfg.MaxConcurrent = 2
	e := newDriverEnv(t, cfg, rec, func(d *Deps) { d.Coordinators = []*CoordinatorHolder{enum.holder()} })
	e.d.Start(e.tasks)

	first := e.trigger(coordinator.Manual, "")
	e.triggered(1, "CHECKPOINT")
	second := e.trigger(coordinator.Manual, "")
	e.rec.waitFor(t, "sent split-after-2")

	e.d.Decline(&weirv1.DeclineCheckpointRequest{Attempt: e.tasks[2].Attempt, CheckpointId: 1, Message: "disk full"})
	wantFailure(t, waitResult(t, first), weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED)
	e.rec.waitFor(t, "coordinator-aborted enumerator id=1")
	e.d.Stats() // the loop finished processing the abort
	if e.rec.has("event split-after-2 delivered") {
		t.Fatal("checkpoint 1's abort released an event held back for checkpoint 2")
	}

	close(proceed)
	e.rec.waitFor(t, "event split-after-2 delivered")
	for _, src := range []string{"src/0", "src/1"} {
		e.rec.before(t, "trigger-returned "+src+" id=2", "event split-after-2 delivered")
	}
	e.ackAll(2, e.chk(2))
	if r := waitResult(t, second); r.Err != nil || r.ID != 2 {
		t.Fatalf("checkpoint 2: %+v", r)
	}
}

// TestDriverLateCoordinatorSnapshotReopensValve: the checkpoint expires
// while the first of two operator coordinators snapshots. The abort opens
// the valves held for it, but the second coordinator's valve is only
// closed afterwards, when the late chain reaches it: the driver must open
// it again when the late result arrives, or that coordinator's events
// would be held until some later checkpoint.
func TestDriverLateCoordinatorSnapshotReopensValve(t *testing.T) {
	rec := newRecorder()
	enum := &opCoordinator{name: "enumerator", rec: rec, valve: &EventValve{}}
	committer := &opCoordinator{name: "committer", rec: rec, valve: &EventValve{}}
	proceed := make(chan struct{})
	enum.setOnSnapshot(func(ctx context.Context, _ *opCoordinator, _ int64) {
		select {
		case <-proceed:
		case <-ctx.Done():
		}
	})
	e := newDriverEnv(t, testConfig(), rec, func(d *Deps) {
		d.Coordinators = []*CoordinatorHolder{enum.holder(), committer.holder()}
	})
	e.d.Start(e.tasks)

	res := e.trigger(coordinator.Manual, "")
	e.rec.waitFor(t, "snapshot enumerator id=1")
	e.clock.waitArmed(t, epoch.Add(10*time.Second))
	e.clock.Advance(10 * time.Second)
	wantFailure(t, waitResult(t, res), weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED)
	e.aborted(1)
	e.rec.waitFor(t, "discard chk-1")

	close(proceed)
	e.rec.waitFor(t, "snapshot committer id=1")
	committer.sendEvent("commit")
	enum.sendEvent("split")
	e.rec.waitFor(t, "event commit delivered", "event split delivered")
	if e.rec.has("trigger src/0 id=1 type=CHECKPOINT") {
		t.Error("the expired checkpoint was triggered")
	}
}

// TestDriverStopWithSavepoint: a draining stop-with-savepoint triggers the
// sources with SAVEPOINT_TERMINATE, writes its metadata into the target,
// notifies every task (the sinks commit) and returns its path; a failed one
// fails the job.
func TestDriverStopWithSavepoint(t *testing.T) {
	e := newDriverEnv(t, testConfig(), nil, nil)
	e.d.Start(e.tasks)
	target := filepath.Join(e.storage.root, "sp")
	res := make(chan Result, 1)
	go func() { res <- e.d.StopWithSavepoint(context.Background(), target, true) }()
	e.triggered(1, "SAVEPOINT_TERMINATE")
	e.ackAll(1, filepath.Join(target, "savepoint-1"))
	r := waitResult(t, res)
	if r.Err != nil || r.Path != filepath.Join(target, "savepoint-1", storage.MetadataFile) {
		t.Fatalf("stop-with-savepoint: %+v", r)
	}
	e.notified(1, 0)
	md, err := storage.ReadMetadata(r.Path)
	if err != nil {
		t.Fatal(err)
	}
	if md.GetType() != weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT {
		t.Errorf("metadata type %s", md.GetType())
	}

	// Again, after a restart (a completed stop-with-savepoint is the last
	// checkpoint of its execution), declined: the job is failed over.
	e.d.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SUSPEND)
	e.d.Start(e.tasks)
	go func() { res <- e.d.StopWithSavepoint(context.Background(), target, false) }()
	e.triggered(2, "SAVEPOINT_SUSPEND")
	e.d.Decline(&weirv1.DeclineCheckpointRequest{Attempt: e.tasks[2].Attempt, CheckpointId: 2, Message: "io"})
	wantFailure(t, waitResult(t, res), weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED)
	e.rec.waitFor(t, "fail-job coordinator: stop-with-savepoint failed: coordinator: checkpoint failed: CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED: declined by job-1/sink/0/0: io")
	e.aborted(2)
}

// epoch is where the tests' clocks start.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fmtAttempt names an attempt as the gateways record it: vertex/index,
// with #attempt after a restart.
func fmtAttempt(a *weirv1.ExecutionAttemptID) string {
	s := fmt.Sprintf("%s/%d", a.GetVertex(), a.GetSubtaskIndex())
	if a.GetAttempt() != 0 {
		s += fmt.Sprintf("#%d", a.GetAttempt())
	}
	return s
}

func shortType(t weirv1.CheckpointType) string {
	return strings.TrimPrefix(t.String(), "CHECKPOINT_TYPE_")
}

// constSource is a rand.Source that always returns the same value: with
// math.MaxUint64 the first periodic delay is the whole interval.
type constSource uint64

func (s constSource) Uint64() uint64 { return uint64(s) }

// Detail asked while the driver closes returns nothing rather than what
// the loop may still be writing (the REST API polls checkpoint details of
// a job being cancelled). The race detector catches a read of the call's
// results after the driver gave up on it.
func TestDriverDetailWhileClosing(t *testing.T) {
	for range 50 {
		e := newDriverEnv(t, testConfig(), nil, nil)
		var wg, started sync.WaitGroup
		for range 4 {
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				started.Done()
				for range 500 {
					if d, ok := e.d.Detail(1); ok && d == nil {
						t.Error("Detail: ok with no detail")
					}
				}
			}()
		}
		started.Wait()
		e.d.Close()
		wg.Wait()
	}
}
