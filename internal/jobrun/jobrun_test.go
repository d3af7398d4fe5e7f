package jobrun

// Scenario tests in the style of the scheduler's: every file under
// testdata/ drives a Run — a real scheduler.Job and the Run that carries
// out its effects — on recording dependencies, and prints, under each
// command, every call the Run made. After each command the harness runs
// what the Run queued (posts to the loop, then I/O, in order) until
// nothing is left, so a command's output is all it led to. Regenerate with
//
//	go test ./internal/jobrun -run TestScenarios -rewrite
//
// Commands:
//
//	job [attempts=N] [delay=D] [adopt=D] [latest=ID]
//	                              vertex lines: NAME p=N [from=SRC]
//	                              (hash edges); fixed-delay restarts;
//	                              adopt: a new leader's job, adopting
//	                              attempt #7 of session "old" within D,
//	                              started from checkpoint latest
//	adopt TM V/I... [eoi]         TaskManager TM reports these attempts
//	                              running
//	tms ID...                     TaskManagers with one free slot each
//	answer CALL TM=(CODE,...)     queue the gRPC codes CALL (deploy,
//	                              cancel) answers on TM, or record on
//	                              "etcd" (the attempts' record); then OK
//	report V/I STATE [cause=TEXT] a subtask's state report
//	running                       every deployed live subtask is RUNNING
//	end-of-input V/I              a subtask read all its input
//	lost TM                       a TaskManager is lost
//	fail TEXT                     the job fails as a whole
//	cancel                        the user cancels the job
//	finalizing N                  the next N waits for the checkpoints
//	                              being finalized time out
//	latest ID                     the newest retained checkpoint (0: none)
//	checkpoint ok|fail|shutdown   the oldest checkpoint request's outcome
//	                              (ok: it completed as the final one)
//	advance D                     move the clock; timers due fire
//	view                          the job's state and subtasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/checkpointing"
	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/restart"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, h.step)
	})
}

type timer struct {
	at      time.Time
	f       func()
	stopped bool
}

type harness struct {
	t   *testing.T
	out *strings.Builder
	now time.Time
	sm  *scheduler.Job
	r   *Run[string]

	posts   []func()
	io      []func(context.Context)
	timers  []*timer
	tms     []string
	known   map[string]bool
	answers map[string][]codes.Code // by "call@tm"
	// finalizing: how many more AwaitFinalizations time out.
	finalizing int
	latest     string
	requests   []func(checkpointing.Result)
}

func (h *harness) printf(format string, args ...any) { fmt.Fprintf(h.out, format+"\n", args...) }

func (h *harness) step(t *testing.T, td *datadriven.TestData) string {
	h.t = t
	var b strings.Builder
	h.out = &b
	if td.Cmd != "job" && h.sm == nil {
		t.Fatalf("%s: job must come first", td.Pos)
	}
	arg := func(key string) (string, bool) {
		for _, a := range td.CmdArgs {
			if a.Key == key {
				if len(a.Vals) == 0 {
					return "", true
				}
				return a.Vals[0], true
			}
		}
		return "", false
	}
	pos := func(i int) string {
		if i >= len(td.CmdArgs) {
			t.Fatalf("%s: %s needs %d arguments", td.Pos, td.Cmd, i+1)
		}
		return td.CmdArgs[i].Key
	}
	switch td.Cmd {
	case "job":
		h.newJob(t, td, arg)
	case "tms":
		for _, a := range td.CmdArgs {
			h.tms = append(h.tms, a.Key)
			h.known[a.Key] = true
		}
		h.r.TrySchedule()
	case "answer":
		call := pos(0)
		for _, a := range td.CmdArgs[1:] {
			for _, v := range a.Vals {
				h.answers[call+"@"+a.Key] = append(h.answers[call+"@"+a.Key], codeOf(t, v))
			}
		}
	case "report":
		st := weirv1.ExecutionState(weirv1.ExecutionState_value["EXECUTION_STATE_"+pos(1)])
		cause, _ := arg("cause")
		h.sm.TaskStateChanged(h.attempt(pos(0)), st, cause)
		h.r.Drain()
	case "running":
		for _, x := range h.sm.View().Execs {
			if !x.Terminal() && x.State != weirv1.ExecutionState_EXECUTION_STATE_RUNNING {
				h.sm.TaskStateChanged(x.Attempt, weirv1.ExecutionState_EXECUTION_STATE_RUNNING, "")
			}
		}
		h.r.Drain()
	case "end-of-input":
		h.sm.EndOfInput(h.attempt(pos(0)))
		h.r.Drain()
	case "lost":
		h.known[pos(0)] = false
		h.sm.TaskManagerLost(pos(0), "lost")
		h.r.Drain()
	case "fail":
		h.sm.Fail(pos(0))
		h.r.Drain()
	case "cancel":
		if err := h.sm.Cancel(); err != nil {
			h.printf("refused: %v", err)
		}
		h.r.Drain()
	case "finalizing":
		h.finalizing, _ = strconv.Atoi(pos(0))
	case "latest":
		h.latest = ""
		if id := pos(0); id != "0" {
			h.latest = "chk-" + id
		}
	case "checkpoint":
		if len(h.requests) == 0 {
			t.Fatalf("%s: no checkpoint requested", td.Pos)
		}
		done := h.requests[0]
		h.requests = h.requests[1:]
		switch pos(0) {
		case "ok":
			// The final checkpoint completed: the coordinator tells the
			// job before it notifies the subtasks, which then finish.
			h.sm.Finishing()
			h.r.Drain()
			done(checkpointing.Result{ID: 1})
		case "fail":
			done(checkpointing.Result{Err: errors.New("declined")})
		case "shutdown":
			done(checkpointing.Result{Err: checkpointing.ErrShutDown})
		}
	case "advance":
		d, err := time.ParseDuration(pos(0))
		if err != nil {
			t.Fatal(err)
		}
		h.advance(d)
	case "adopt":
		_, eoi := arg("eoi")
		for _, a := range td.CmdArgs[1:] {
			if a.Key == "eoi" {
				continue
			}
			v, i, _ := strings.Cut(a.Key, "/")
			idx, _ := strconv.Atoi(i)
			at := &weirv1.ExecutionAttemptID{JobId: "j", Vertex: v, SubtaskIndex: int32(idx), Attempt: 7, Session: "old"}
			keep, _ := h.sm.Report(pos(0), scheduler.AttemptReport{Attempt: at, State: weirv1.ExecutionState_EXECUTION_STATE_RUNNING, EndOfInput: eoi})
			h.known[pos(0)] = true
			h.printf("%s on %s kept: %t", a.Key, pos(0), keep)
		}
		h.r.Drain()
	case "view":
		v := h.sm.View()
		h.printf("state=%s", v.State.FlinkName())
		for _, x := range v.Execs {
			h.printf("  %s@%s %s", name(x), x.TaskManager, strings.TrimPrefix(x.State.String(), "EXECUTION_STATE_"))
		}
	default:
		t.Fatalf("%s: unknown command %s", td.Pos, td.Cmd)
	}
	h.settle()
	return b.String()
}

func (h *harness) newJob(t *testing.T, td *datadriven.TestData, arg func(string) (string, bool)) {
	g := &weirv1.JobGraph{Name: "job"}
	for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
		f := strings.Fields(line)
		v := &weirv1.JobVertex{Name: f[0], Parallelism: 1}
		for _, kv := range f[1:] {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "p":
				p, _ := strconv.Atoi(val)
				v.Parallelism = int32(p)
			case "from":
				v.Inputs = append(v.Inputs, &weirv1.JobEdge{Source: val, Partitioner: weirv1.Partitioner_PARTITIONER_HASH})
			default:
				t.Fatalf("%s: unknown vertex key %q", td.Pos, k)
			}
		}
		g.Vertices = append(g.Vertices, v)
	}
	attempts, delay := 3, time.Second
	if s, ok := arg("attempts"); ok {
		attempts, _ = strconv.Atoi(s)
	}
	if s, ok := arg("delay"); ok {
		delay, _ = time.ParseDuration(s)
	}
	spec := &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: int32(attempts), Delay: durationpb.New(delay)}
	h.now = epoch
	cfg := scheduler.Config{JobID: "j", Session: "s", Graph: g, Strategy: restart.New(spec, restart.Budget{}, epoch)}
	if s, ok := arg("adopt"); ok {
		d, _ := time.ParseDuration(s)
		ad := &scheduler.Adoption{Window: d}
		for _, v := range g.Vertices {
			for i := range v.Parallelism {
				ad.Attempts = append(ad.Attempts, scheduler.Placed{Attempt: &weirv1.ExecutionAttemptID{JobId: "j", Vertex: v.Name, SubtaskIndex: i, Attempt: 7, Session: "old"}})
			}
		}
		cfg.Adopt = ad
	}
	start := ""
	if id, ok := arg("latest"); ok {
		start = "chk-" + id
		h.latest = start
	}
	sm, err := scheduler.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	sm.StartAdoption()
	h.sm, h.known, h.answers = sm, map[string]bool{}, map[string][]codes.Code{}
	h.r = New(sm, start, Deps[string]{
		Executor: h, Post: func(f func()) { h.posts = append(h.posts, f) }, Clock: h,
		Coordinator: fakeCoordinator{h}, TaskManagers: fakeTaskManagers{h}, Checkpoints: fakeCheckpoints{h},
		Lifecycle: fakeLifecycle{h}, Slots: fakeSlots{h}, Logger: slog.New(slog.DiscardHandler),
	})
	h.r.Drain()
}

// settle runs what the Run queued, posts first, until nothing is left.
func (h *harness) settle() {
	for range 10000 {
		switch {
		case len(h.posts) > 0:
			f := h.posts[0]
			h.posts = h.posts[1:]
			f()
		case len(h.io) > 0:
			f := h.io[0]
			h.io = h.io[1:]
			f(context.Background())
		default:
			return
		}
	}
	h.t.Fatal("the run does not settle")
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	for _, tm := range h.timers {
		if !tm.stopped && !tm.at.After(h.now) {
			tm.stopped = true
			tm.f()
		}
	}
	h.timers = slices.DeleteFunc(h.timers, func(tm *timer) bool { return tm.stopped })
}

func (h *harness) attempt(subtask string) *weirv1.ExecutionAttemptID {
	for _, x := range h.sm.View().Execs {
		if name(x) == subtask || strings.HasPrefix(name(x), subtask+"#") {
			if !x.Terminal() || name(x) == subtask {
				return x.Attempt
			}
		}
	}
	h.t.Fatalf("no subtask %s", subtask)
	return nil
}

// name is vertex/index#attempt.
func name(x scheduler.Exec) string {
	return fmt.Sprintf("%s/%d#%d", x.Vertex.GetName(), x.Attempt.GetSubtaskIndex(), x.Attempt.GetAttempt())
}

func attemptName(h *harness, a *weirv1.ExecutionAttemptID) string {
	for _, x := range h.sm.View().Execs {
		if scheduler.SameAttempt(x.Attempt, a) {
			return name(x)
		}
	}
	return a.Key()
}

func codeOf(t *testing.T, s string) codes.Code {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == s {
			return c
		}
	}
	t.Fatalf("unknown code %q", s)
	return 0
}

// The harness is the Run's clock and executor.

func (h *harness) Now() time.Time { return h.now }

func (h *harness) AfterFunc(d time.Duration, f func()) func() bool {
	tm := &timer{at: h.now.Add(d), f: f}
	h.timers = append(h.timers, tm)
	h.printf("timer +%s", d)
	return func() bool {
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

func (h *harness) Go(ctx context.Context, io func(context.Context)) { h.io = append(h.io, io) }

// answer is the next code queued for call on tm.
func (h *harness) answer(call, tm string) error {
	key := call + "@" + tm
	q := h.answers[key]
	if len(q) == 0 {
		return nil
	}
	h.answers[key] = q[1:]
	if q[0] == codes.OK {
		return nil
	}
	return status.Error(q[0], "injected")
}

type (
	fakeCoordinator  struct{ h *harness }
	fakeTaskManagers struct{ h *harness }
	fakeCheckpoints  struct{ h *harness }
	fakeLifecycle    struct{ h *harness }
	fakeSlots        struct{ h *harness }
)

func (c fakeCoordinator) Start(tasks []coordinator.Task) {
	c.h.printf("coordinator start: %d subtasks", len(tasks))
}

func (c fakeCoordinator) StartSoon(tasks []coordinator.Task) {
	c.h.printf("coordinator start, checkpoint soon: %d subtasks", len(tasks))
}

func (c fakeCoordinator) Stop(reason weirv1.CheckpointFailureReason) {
	c.h.printf("coordinator stop: %s", strings.TrimPrefix(reason.String(), "CHECKPOINT_FAILURE_REASON_"))
}

func (c fakeCoordinator) TaskFinished(a *weirv1.ExecutionAttemptID) {
	c.h.printf("coordinator: %s finished", attemptName(c.h, a))
}

func (c fakeCoordinator) Request(kind coordinator.RequestKind, _ string, done func(checkpointing.Result)) {
	c.h.printf("coordinator: checkpoint requested")
	c.h.requests = append(c.h.requests, done)
}

func (t fakeTaskManagers) Plan(e scheduler.Deploy, rp string) ([]Deployment, error) {
	var out []Deployment
	for _, x := range e.Execs {
		out = append(out, Deployment{TaskManager: x.TaskManager, Attempts: []*weirv1.ExecutionAttemptID{x.Attempt}, Payload: name(x)})
	}
	from := rp
	if from == "" {
		from = "no state"
	}
	t.h.printf("plan restart %d from %s: %d deployments", e.Restart, from, len(out))
	return out, nil
}

func (t fakeTaskManagers) Deploy(_ context.Context, d Deployment) error {
	err := t.h.answer("deploy", d.TaskManager)
	t.h.printf("deploy %s on %s: %s", d.Payload, d.TaskManager, status.Code(err))
	return err
}

func (t fakeTaskManagers) Known(tm string) bool { return t.h.known[tm] }

// Cancel drops a TaskManager whose connection failed, as the
// JobManager's does.
func (t fakeTaskManagers) Cancel(_ context.Context, x scheduler.Exec) error {
	err := t.h.answer("cancel", x.TaskManager)
	t.h.printf("cancel %s on %s: %s", name(x), x.TaskManager, status.Code(err))
	if status.Code(err) == codes.Unavailable {
		t.h.printf("%s unreachable", x.TaskManager)
		t.h.known[x.TaskManager] = false
	}
	return err
}

func (c fakeCheckpoints) AwaitFinalizations(ctx context.Context) error {
	if c.h.finalizing > 0 {
		c.h.finalizing--
		c.h.printf("await finalizations: still finalizing")
		return context.DeadlineExceeded
	}
	c.h.printf("await finalizations: none")
	return nil
}

func (c fakeCheckpoints) Sweep(context.Context) { c.h.printf("sweep") }

func (c fakeCheckpoints) Latest(context.Context) (string, error) { return c.h.latest, nil }

func (c fakeCheckpoints) Restore(_ context.Context, rp string, full bool) error {
	c.h.printf("restore %s (whole job: %t)", rp, full)
	return nil
}

func (c fakeCheckpoints) NotifyAdopted(_ context.Context, rp string, attempts []*weirv1.ExecutionAttemptID) {
	names := make([]string, 0, len(attempts))
	for _, a := range attempts {
		names = append(names, attemptName(c.h, a))
	}
	c.h.printf("notify %s completed to %s", rp, strings.Join(names, " "))
}

func (l fakeLifecycle) Adopted(e scheduler.Adopted) {
	l.h.printf("adopted %d subtasks", len(e.Execs))
}

func (l fakeLifecycle) RecordAttempts(_ context.Context, seq int64, attempts []scheduler.Placed) error {
	err := l.h.answer("record", "etcd")
	names := make([]string, 0, len(attempts))
	for _, a := range attempts {
		names = append(names, attemptName(l.h, a.Attempt))
	}
	l.h.printf("record %d: %s: %s", seq, strings.Join(names, " "), status.Code(err))
	return err
}

func (l fakeLifecycle) StateChanged(e scheduler.StateChanged) {
	l.h.printf("state %s → %s", e.From.FlinkName(), e.To.FlinkName())
}

func (l fakeLifecycle) RestartStarted(e scheduler.RestartStarted) {
	l.h.printf("restart %d regions=%v full=%t: %s", e.Restart, e.Regions, e.Full, e.Cause)
}

func (l fakeLifecycle) TakenAsStopped(x scheduler.Exec, gone bool) {
	why := "its word"
	if gone {
		why = "gone"
	}
	l.h.printf("%s taken as stopped on %s (%s)", name(x), x.TaskManager, why)
}

func (l fakeLifecycle) PersistStatus(_ context.Context, e scheduler.PersistStatus) {
	l.h.printf("persist restarts=%d", e.Restarts)
}

func (l fakeLifecycle) Terminated(_ context.Context, st weirv1.JobState) {
	l.h.printf("terminated %s", st.FlinkName())
}

func (s fakeSlots) Take(prefer []string, offer func([]string)) bool {
	var free []string
	held := s.h.sm.View().SlotsHeld()
	for _, tm := range s.h.tms {
		if s.h.known[tm] && held[tm] == 0 {
			free = append(free, tm)
		}
	}
	tms, ok := scheduler.MatchSlots(free, prefer)
	if !ok {
		s.h.printf("slots: need %d, %d free", len(prefer), len(free))
		return false
	}
	s.h.printf("slots: take %s", strings.Join(tms, ","))
	offer(tms)
	return true
}
