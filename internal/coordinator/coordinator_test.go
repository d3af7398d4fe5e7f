package coordinator

// Scenario tests in the style of etcd raft's interaction tests: every file
// under testdata/ is a script that drives the Coordinator state machine step
// by step and records, under each command, every effect Ready() returned.
// Regenerate the expected output with
//
//	go test ./internal/coordinator -run TestScenarios -rewrite
//
// Commands (durations are Go durations; times print relative to the fake
// clock's start, e.g. +1.5s):
//
//	config interval=1s min-pause=0s timeout=10s max-concurrent=1 tolerable=0
//	       [rand=max|min|seed:N] [history=N] [job=ID] [max-parallelism=N]
//	       [exactly-once=bool] [unaligned] [incremental] [aligned-timeout=D]
//	       [backlog-interval=D]
//	    a new coordinator and a fake clock at +0s. rand picks the random
//	    source: max makes the first periodic trigger come after exactly
//	    interval (the default), min after exactly min_pause, seed:N a PCG
//	    seeded with N.
//	start tasks=src/0,src/1,sink/0 sources=src/0,src/1 [soon]
//	    the job turned RUNNING with these subtasks (vertex/index[#attempt]);
//	    soon: StartSoon, as for subtasks adopted from a previous leader.
//	stop reason=REASON
//	backlog task=V/I [off]  a source reports (or stops reporting) a backlog
//	reconfigure [interval=D] [timeout=D] [min-pause=D] [backlog-interval=D] [aligned=bool]
//	    change periodic checkpointing on the running coordinator.
//	trigger kind=periodic|manual|full|rescale|savepoint [forced=bool] [target=DIR]
//	    enqueue a request (savepoints are forced by default, as the Driver
//	    does); prints its number.
//	trigger kind=stop [drain] [target=DIR]
//	    stop-with-savepoint (a synchronous savepoint; drain terminates).
//	advance DURATION       move the clock, then Tick.
//	elapse DURATION        move the clock without Tick (the next event
//	                       races a timer due at the same instant).
//	tick                   Tick without moving the clock.
//	prepared req=N id=N [location=DIR]     (default /ckpt/chk-<id>)
//	    shorthand for id-allocated + location-ready.
//	prepare-failed req=N [id=N] [err=TEXT]
//	    without id the counter failed; with id the location did.
//	id-allocated req=N id=N [err=TEXT]     the counter's answer (AllocateID)
//	location-ready id=N [location=DIR] [err=TEXT]    InitLocation's answer
//	coordinators-snapshotted id=N [states=name:data,...] [err=TEXT]
//	hooks-done id=N [states=name:data,...] [err=TEXT]
//	    the operator coordinators' / master hooks' answers; config
//	    coordinators=true / hooks=true put those steps in the chain.
//	restored id=N [path=P] [savepoint]     the job started from checkpoint N
//	ack task=V/I id=N [attempt=A] [size=BYTES] [nostate] [end-of-input]
//	decline task=V/I id=N [attempt=A] [reason=REASON] [msg=TEXT]
//	trigger-failed id=N [err=TEXT]
//	finalized id=N [path=P] [subsumed=N] [err=TEXT] [unknown]
//	    Finalize's outcome; unknown: the store write timed out, so whether
//	    the checkpoint is stored is not known (err is then required).
//	cleanups n=N           N checkpoints' files are still being deleted.
//	task-finished task=V/I [attempt=A]
//	stats / detail id=N / state
//	    the API's statistics / one checkpoint's detail / the coordinator's
//	    internal state (queue, preparing, pending, failure count, timers).
//
// After every command the harness prints the effects in order, then
// "next-deadline: ..." whenever NextDeadline changed. Effects print as
//
//	AllocateID req=N
//	InitLocation id=N [savepoint] [target=DIR]
//	SnapshotOperatorCoordinators id=N (events held back)
//	SnapshotMasterHooks id=N at=T
//	SendTrigger id=N at=T opts=TYPE[,flags] tasks=[...]
//	    [then release coordinator events]
//	Finalize id=N location=DIR savepoint=BOOL, then the metadata, one line
//	    per subtask state and one per coordinator / master-hook state
//	NotifyComplete id=N last-subsumed=N tasks=[...]
//	NotifyAborted id=N tasks=[...]
//	DiscardState [location=DIR] [states=[...]]
//	RequestDone req=N id=N path=P | failed=REASON [(message)]
//	FailJob cause=TEXT
//
// The harness also checks invariants after every command (a driver would
// spin or lose data otherwise): after Tick the next deadline is in the
// future; a request is resolved at most once; a location is never discarded
// while its Finalize is in flight; failures wrap ErrCheckpointFailed.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// epoch is where every fake clock starts; output is relative to it.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock only moves when a test advances it.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// constSource is a rand.Source that always returns the same value. With
// math.MaxUint64, Int64N(n) returns n-1; with 1 it returns 0 (n not a power
// of two), which pins the first periodic delay to interval or min_pause.
type constSource uint64

func (s constSource) Uint64() uint64 { return uint64(s) }

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, h.run)
	})
}

type harness struct {
	clock *fakeClock
	c     *Coordinator
	cfg   Config

	locations  map[int64]string // checkpoint ID → location given by prepared
	finalizing map[string]bool  // locations whose Finalize is in flight
	resolved   map[int64]bool   // requests a RequestDone resolved
	deadline   time.Time        // the last printed NextDeadline
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	a := newArgs(t, td)
	if td.Cmd != "config" && h.c == nil {
		t.Fatalf("%s: config must come first", td.Pos)
	}
	var b strings.Builder
	switch td.Cmd {
	case "config":
		h.config(a)
	case "start":
		sources := map[string]bool{}
		for _, s := range a.list("sources") {
			sources[fmtAttempt(h.attempt(t, s, -1))] = true
		}
		var tasks []Task
		for _, s := range a.list("tasks") {
			at := h.attempt(t, s, -1)
			tasks = append(tasks, Task{Attempt: at, Source: sources[fmtAttempt(at)]})
		}
		soon := a.bool("soon", false)
		a.done()
		if soon {
			h.c.StartSoon(tasks)
		} else {
			h.c.Start(tasks)
		}
	case "backlog":
		at := h.attempt(t, a.str("task", ""), -1)
		on := !a.bool("off", false)
		a.done()
		h.c.SourceBacklog(at, on)
	case "reconfigure":
		var r Reconfiguration
		for key, field := range map[string]**time.Duration{"interval": &r.Interval, "timeout": &r.Timeout, "min-pause": &r.MinPause, "backlog-interval": &r.IntervalDuringBacklog} {
			if a.has(key) {
				d := a.dur(key, 0)
				*field = &d
			}
		}
		if a.has("aligned") {
			b := a.bool("aligned", false)
			r.Aligned = &b
		}
		a.done()
		h.c.Reconfigure(r)
	case "stop":
		r := parseReason(t, a.str("reason", ""))
		a.done()
		h.c.Stop(r)
	case "trigger":
		var kind RequestKind
		switch k := a.str("kind", ""); k {
		case "periodic":
			kind = Periodic
		case "manual":
			kind = Manual
		case "full":
			kind = FullCheckpoint
		case "rescale":
			kind = RescaleCheckpoint
		case "savepoint":
			kind = Savepoint
		case "stop":
			kind = SyncSavepoint
		default:
			t.Fatalf("%s: unknown kind %q", td.Pos, k)
		}
		if kind == SyncSavepoint {
			drain := a.bool("drain", false)
			target := a.str("target", "")
			a.done()
			fmt.Fprintf(&b, "req=%d\n", h.c.StopWithSavepoint(target, drain))
			break
		}
		forced := a.bool("forced", kind == Savepoint)
		target := a.str("target", "")
		a.done()
		fmt.Fprintf(&b, "req=%d\n", h.c.Trigger(kind, forced, target))
	case "advance":
		if len(td.CmdArgs) != 1 || len(td.CmdArgs[0].Vals) != 0 {
			t.Fatalf("%s: usage: advance DURATION", td.Pos)
		}
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			t.Fatalf("%s: %v", td.Pos, err)
		}
		h.clock.Advance(d)
		h.tick(t, td)
	case "elapse":
		// Moves the clock without Tick: the next event happens at the same
		// instant as a timer the driver has not fired yet.
		if len(td.CmdArgs) != 1 || len(td.CmdArgs[0].Vals) != 0 {
			t.Fatalf("%s: usage: elapse DURATION", td.Pos)
		}
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			t.Fatalf("%s: %v", td.Pos, err)
		}
		h.clock.Advance(d)
	case "tick":
		a.done()
		h.tick(t, td)
	case "prepared":
		// Shorthand for id-allocated followed by location-ready.
		req, id := a.int("req", -1), a.int("id", -1)
		loc := a.str("location", fmt.Sprintf("/ckpt/chk-%d", id))
		a.done()
		h.locations[id] = loc
		h.c.IDAllocated(req, id, nil)
		h.c.LocationReady(id, loc, nil)
	case "prepare-failed":
		// Without id the counter failed; with id the location failed.
		req, id := a.int("req", -1), a.int("id", 0)
		err := errors.New(a.str("err", "injected I/O error"))
		a.done()
		if id == 0 {
			h.c.IDAllocated(req, 0, err)
			break
		}
		h.c.IDAllocated(req, id, nil)
		h.c.LocationReady(id, "", err)
	case "id-allocated":
		req, id := a.int("req", -1), a.int("id", 0)
		err := a.err()
		a.done()
		h.c.IDAllocated(req, id, err)
	case "location-ready":
		id := a.int("id", -1)
		loc := a.str("location", fmt.Sprintf("/ckpt/chk-%d", id))
		err := a.err()
		a.done()
		if err == nil {
			h.locations[id] = loc
		} else {
			loc = ""
		}
		h.c.LocationReady(id, loc, err)
	case "coordinators-snapshotted":
		id := a.int("id", -1)
		states := a.namedStates("states")
		err := a.err()
		a.done()
		h.c.CoordinatorsSnapshotted(id, states, err)
	case "hooks-done":
		id := a.int("id", -1)
		states := a.namedStates("states")
		err := a.err()
		a.done()
		h.c.MasterHooksDone(id, states, err)
	case "restored":
		id := a.int("id", -1)
		path := a.str("path", fmt.Sprintf("/ckpt/chk-%d/_metadata", id))
		sp := a.bool("savepoint", false)
		a.done()
		h.c.Restored(id, path, sp)
	case "ack":
		at := h.attempt(t, a.str("task", ""), a.int("attempt", -1))
		id := a.int("id", -1)
		ack := &weirv1.AcknowledgeCheckpointRequest{
			Attempt: at, CheckpointId: id,
			Metrics: &weirv1.CheckpointMetrics{SyncDurationMs: 1, AsyncDurationMs: 2},
		}
		ack.EndOfInput = a.bool("end-of-input", false)
		size := a.int("size", 100)
		if !a.bool("nostate", false) {
			ack.State = &weirv1.SubtaskState{
				Vertex: at.GetVertex(), SubtaskIndex: at.GetSubtaskIndex(),
				KeyedState: &weirv1.StateHandle{Path: statePath(id, at), Size: size},
				StateSize:  size, CheckpointedSize: size,
			}
		}
		a.done()
		fmt.Fprintf(&b, "result: %s\n", h.c.Acknowledge(ack))
	case "decline":
		at := h.attempt(t, a.str("task", ""), a.int("attempt", -1))
		d := &weirv1.DeclineCheckpointRequest{
			Attempt: at, CheckpointId: a.int("id", -1),
			Reason:  parseReason(t, a.str("reason", "CHECKPOINT_DECLINED")),
			Message: a.str("msg", "injected"),
		}
		a.done()
		h.c.Decline(d)
	case "trigger-failed":
		id := a.int("id", -1)
		err := errors.New(a.str("err", "injected RPC error"))
		a.done()
		h.c.TriggerFailed(id, err)
	case "finalized":
		id := a.int("id", -1)
		path := a.str("path", h.locations[id]+"/_metadata")
		subsumed := a.int("subsumed", 0)
		var err error
		if a.has("err") {
			err = errors.New(a.str("err", ""))
		}
		unknown := a.bool("unknown", false)
		a.done()
		delete(h.finalizing, h.locations[id])
		if unknown {
			h.c.FinalizeOutcomeUnknown(id, err)
			break
		}
		h.c.Finalized(id, path, subsumed, err)
	case "cleanups":
		n := a.int("n", -1)
		a.done()
		h.c.CleanupsInProgress(int(n))
	case "progress":
		at := h.attempt(t, a.str("task", ""), a.int("attempt", -1))
		phase, ok := weirv1.CheckpointPhase_value["CHECKPOINT_PHASE_"+a.str("phase", "")]
		if !ok {
			t.Fatalf("%s: unknown phase", td.Pos)
		}
		p := &weirv1.CheckpointProgress{CheckpointId: a.int("id", -1), Phase: weirv1.CheckpointPhase(phase),
			BarriersReceived: int32(a.int("received", 0)), Channels: int32(a.int("channels", 0))}
		a.done()
		h.c.Progress(at, []*weirv1.CheckpointProgress{p})
	case "task-finished":
		at := h.attempt(t, a.str("task", ""), a.int("attempt", -1))
		a.done()
		h.c.TaskFinished(at)
	case "stats":
		a.done()
		h.stats(&b)
	case "detail":
		id := a.int("id", -1)
		a.done()
		h.detail(&b, id)
	case "resume-periodic":
		a.done()
		h.c.ResumePeriodic()
	case "state":
		a.done()
		h.state(&b)
	case "next":
		a.done()
		n := h.c.NextCheckpoint()
		fmt.Fprintf(&b, "%s %s queued=%d due=%s\n%s\n", n.GetState(), n.GetReason(), n.GetQueued(), h.fmtMs(n.GetDueTimestampMs()), n.GetMessage())
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	for _, e := range h.c.Ready() {
		h.check(t, td, e)
		b.WriteString(h.fmtEffect(e))
		b.WriteByte('\n')
	}
	if d := h.c.NextDeadline(); !d.Equal(h.deadline) {
		h.deadline = d
		fmt.Fprintf(&b, "next-deadline: %s\n", h.fmtTime(d))
	}
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

func (h *harness) config(a *args) {
	cfg := Config{
		JobID:                 a.str("job", "job-1"),
		Interval:              a.dur("interval", 0),
		BacklogInterval:       a.has("backlog-interval"),
		IntervalDuringBacklog: a.dur("backlog-interval", 0),
		MinPause:              a.dur("min-pause", 0),
		Timeout:               a.dur("timeout", 10*time.Second),
		MaxConcurrent:         int(a.int("max-concurrent", 1)),
		Tolerable:             int(a.int("tolerable", -1)),
		MaxParallelism:        int(a.int("max-parallelism", 128)),
		HistorySize:           int(a.int("history", 0)),
		OperatorCoordinators:  a.bool("coordinators", false),
		MasterHooks:           a.bool("hooks", false),
		AlignRescale:          a.bool("align-rescale", false),
		Options: &weirv1.CheckpointOptions{
			ExactlyOnce:                a.bool("exactly-once", true),
			Unaligned:                  a.bool("unaligned", false),
			Incremental:                a.bool("incremental", false),
			AlignedCheckpointTimeoutMs: a.dur("aligned-timeout", 0).Milliseconds(),
		},
	}
	var src rand.Source
	switch r := a.str("rand", "max"); {
	case r == "max":
		src = constSource(math.MaxUint64)
	case r == "min":
		src = constSource(1)
	case strings.HasPrefix(r, "seed:"):
		seed, err := strconv.ParseUint(strings.TrimPrefix(r, "seed:"), 10, 64)
		if err != nil {
			a.t.Fatalf("%s: rand: %v", a.td.Pos, err)
		}
		src = rand.NewPCG(seed, 0)
	default:
		a.t.Fatalf("%s: rand must be max, min or seed:N", a.td.Pos)
	}
	a.done()
	h.cfg = cfg
	h.clock = &fakeClock{now: epoch}
	h.c = New(cfg, h.clock, rand.New(src))
	h.locations = map[int64]string{}
	h.finalizing = map[string]bool{}
	h.resolved = map[int64]bool{}
	h.deadline = time.Time{}
}

func (h *harness) tick(t *testing.T, td *datadriven.TestData) {
	h.c.Tick()
	// A driver resets its timer to NextDeadline after every event: one that
	// is not in the future after a Tick makes it fire again at once, forever.
	if d := h.c.NextDeadline(); !d.IsZero() && !d.After(h.clock.Now()) {
		t.Errorf("%s: after Tick at %s the next deadline %s is not in the future (the driver would spin)",
			td.Pos, h.fmtTime(h.clock.Now()), h.fmtTime(d))
	}
}

// check verifies invariants every effect must keep.
func (h *harness) check(t *testing.T, td *datadriven.TestData, e Effect) {
	switch e := e.(type) {
	case RequestDone:
		if h.resolved[e.Request] {
			t.Errorf("%s: request %d resolved twice", td.Pos, e.Request)
		}
		h.resolved[e.Request] = true
		if e.Err != nil && !errors.Is(e.Err, ErrCheckpointFailed) {
			t.Errorf("%s: request %d: %v does not wrap ErrCheckpointFailed", td.Pos, e.Request, e.Err)
		}
	case Finalize:
		h.finalizing[e.Location] = true
	case DiscardState:
		if e.Location != "" && h.finalizing[e.Location] {
			t.Errorf("%s: %s discarded while its Finalize is in flight", td.Pos, e.Location)
		}
	}
}

// attempt parses vertex/index[#attempt]; attempt >= 0 overrides the suffix.
func (h *harness) attempt(t *testing.T, s string, attempt int64) *weirv1.ExecutionAttemptID {
	s, suffix, hasSuffix := strings.Cut(s, "#")
	v, idx, ok := strings.Cut(s, "/")
	i, err := strconv.Atoi(idx)
	if !ok || v == "" || err != nil {
		t.Fatalf("bad task %q: want vertex/index[#attempt]", s)
	}
	a := &weirv1.ExecutionAttemptID{JobId: h.cfg.JobID, Vertex: v, SubtaskIndex: int32(i)}
	if hasSuffix {
		n, err := strconv.Atoi(suffix)
		if err != nil {
			t.Fatalf("bad attempt in %q", s)
		}
		a.Attempt = int32(n)
	}
	if attempt >= 0 {
		a.Attempt = int32(attempt)
	}
	return a
}

func statePath(id int64, a *weirv1.ExecutionAttemptID) string {
	return fmt.Sprintf("chk-%d/%s-%d", id, a.GetVertex(), a.GetSubtaskIndex()) + attemptSuffix(a)
}

func attemptSuffix(a *weirv1.ExecutionAttemptID) string {
	if a.GetAttempt() == 0 {
		return ""
	}
	return fmt.Sprintf("#%d", a.GetAttempt())
}

func fmtAttempt(a *weirv1.ExecutionAttemptID) string {
	return fmt.Sprintf("%s/%d", a.GetVertex(), a.GetSubtaskIndex()) + attemptSuffix(a)
}

func fmtAttempts(as []*weirv1.ExecutionAttemptID) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = fmtAttempt(a)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (h *harness) fmtTime(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return "+" + t.Sub(epoch).String()
}

func (h *harness) fmtMs(ms int64) string {
	if ms == 0 {
		return "none"
	}
	return h.fmtTime(time.UnixMilli(ms))
}

func shortReason(r weirv1.CheckpointFailureReason) string {
	return strings.TrimPrefix(r.String(), "CHECKPOINT_FAILURE_REASON_")
}

func shortType(t weirv1.CheckpointType) string {
	return strings.TrimPrefix(t.String(), "CHECKPOINT_TYPE_")
}

func parseReason(t *testing.T, s string) weirv1.CheckpointFailureReason {
	v, ok := weirv1.CheckpointFailureReason_value["CHECKPOINT_FAILURE_REASON_"+s]
	if !ok {
		t.Fatalf("unknown failure reason %q", s)
	}
	return weirv1.CheckpointFailureReason(v)
}

func fmtOptions(o *weirv1.CheckpointOptions) string {
	parts := []string{shortType(o.GetType())}
	if o.GetExactlyOnce() {
		parts = append(parts, "exactly-once")
	}
	if o.GetUnaligned() {
		parts = append(parts, "unaligned")
	}
	if o.GetAlignedCheckpointTimeoutMs() > 0 {
		parts = append(parts, fmt.Sprintf("aligned-timeout=%dms", o.GetAlignedCheckpointTimeoutMs()))
	}
	if o.GetIncremental() {
		parts = append(parts, "incremental")
	}
	if o.GetTargetLocation() != "" {
		parts = append(parts, "target="+o.GetTargetLocation())
	}
	return strings.Join(parts, ",")
}

func fmtStates(sts []*weirv1.SubtaskState) string {
	s := make([]string, len(sts))
	for i, st := range sts {
		s[i] = st.GetKeyedState().GetPath()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (h *harness) fmtEffect(e Effect) string {
	switch e := e.(type) {
	case AllocateID:
		return fmt.Sprintf("AllocateID req=%d", e.Request)
	case InitLocation:
		s := fmt.Sprintf("InitLocation id=%d", e.ID)
		if e.Savepoint {
			s += " savepoint"
		}
		if e.Target != "" {
			s += " target=" + e.Target
		}
		return s
	case SnapshotOperatorCoordinators:
		return fmt.Sprintf("SnapshotOperatorCoordinators id=%d (events held back)", e.ID)
	case SnapshotMasterHooks:
		return fmt.Sprintf("SnapshotMasterHooks id=%d at=%s", e.ID, h.fmtTime(e.Timestamp))
	case SendTrigger:
		s := fmt.Sprintf("SendTrigger id=%d at=%s opts=%s tasks=%s",
			e.ID, h.fmtTime(e.Timestamp), fmtOptions(e.Options), fmtAttempts(e.Tasks))
		if e.ReleaseCoordinatorEvents {
			s += " then release coordinator events"
		}
		return s
	case Finalize:
		var b strings.Builder
		md := e.Metadata
		fmt.Fprintf(&b, "Finalize id=%d location=%s savepoint=%t", e.ID, e.Location, e.Savepoint)
		if e.Synchronous {
			b.WriteString(" synchronous")
		}
		b.WriteByte('\n')
		fmt.Fprintf(&b, "  metadata job=%s id=%d type=%s trigger=%s completion=%s max-parallelism=%d subtasks=%d",
			md.GetJobId(), md.GetCheckpointId(), shortType(md.GetType()), h.fmtMs(md.GetTriggerTimestampMs()),
			h.fmtMs(md.GetCompletionTimestampMs()), md.GetMaxParallelism(), len(md.GetSubtasks()))
		for _, st := range md.GetSubtasks() {
			fmt.Fprintf(&b, "\n  state %s/%d keyed=%s size=%d",
				st.GetVertex(), st.GetSubtaskIndex(), st.GetKeyedState().GetPath(), st.GetStateSize())
		}
		for _, s := range md.GetOperatorCoordinators() {
			fmt.Fprintf(&b, "\n  coordinator %s=%s", s.GetName(), s.GetData())
		}
		for _, s := range md.GetMasterStates() {
			fmt.Fprintf(&b, "\n  master-hook %s=%s", s.GetName(), s.GetData())
		}
		return b.String()
	case NotifyComplete:
		s := fmt.Sprintf("NotifyComplete id=%d last-subsumed=%d tasks=%s", e.ID, e.LastSubsumed, fmtAttempts(e.Tasks))
		if e.Final {
			s += " final"
		}
		if e.Repeat {
			s += " repeat"
		}
		return s
	case NotifyAborted:
		return fmt.Sprintf("NotifyAborted id=%d tasks=%s", e.ID, fmtAttempts(e.Tasks))
	case DiscardState:
		s := "DiscardState"
		if e.Location != "" {
			s += " location=" + e.Location
		}
		if len(e.States) > 0 {
			s += " states=" + fmtStates(e.States)
		}
		return s
	case RequestDone:
		s := fmt.Sprintf("RequestDone req=%d id=%d", e.Request, e.ID)
		var f *Failure
		switch {
		case e.Err == nil:
			s += " path=" + e.Path
		case errors.As(e.Err, &f):
			s += " failed=" + shortReason(f.Reason)
			if f.Message != "" {
				s += " (" + f.Message + ")"
			}
		default:
			s += " err=" + e.Err.Error()
		}
		return s
	case FailJob:
		return "FailJob cause=" + e.Cause.Error()
	}
	return fmt.Sprintf("unknown effect %T", e)
}

func (h *harness) fmtStats(b *strings.Builder, c *weirv1.CheckpointStats) {
	fmt.Fprintf(b, "#%d %s", c.GetId(), strings.TrimPrefix(c.GetStatus().String(), "CHECKPOINT_STATUS_"))
	if c.GetIsSavepoint() {
		b.WriteString(" savepoint")
	}
	if t := c.GetCheckpointType(); t == weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND ||
		t == weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE {
		b.WriteString(" type=" + shortType(t))
	}
	fmt.Fprintf(b, " trigger=%s acked=%d/%d state=%dB e2e=%dms",
		h.fmtMs(c.GetTriggerTimestampMs()), c.GetNumAcknowledgedSubtasks(), c.GetNumSubtasks(),
		c.GetStateSize(), c.GetEndToEndDurationMs())
	if c.GetExternalPath() != "" {
		fmt.Fprintf(b, " path=%s", c.GetExternalPath())
	}
	if c.GetFailureReason() != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_UNSPECIFIED {
		fmt.Fprintf(b, " reason=%s failed-at=%s", shortReason(c.GetFailureReason()), h.fmtMs(c.GetFailureTimestampMs()))
	}
	b.WriteByte('\n')
}

func (h *harness) stats(b *strings.Builder) {
	s := h.c.Stats()
	n := s.GetCounts()
	fmt.Fprintf(b, "counts: total=%d in-progress=%d completed=%d failed=%d\n",
		n.GetTotal(), n.GetInProgress(), n.GetCompleted(), n.GetFailed())
	for _, c := range s.GetHistory() {
		h.fmtStats(b, c)
	}
	id := func(c *weirv1.CheckpointStats) string {
		if c == nil {
			return "none"
		}
		return fmt.Sprintf("#%d", c.GetId())
	}
	fmt.Fprintf(b, "latest: completed=%s savepoint=%s failed=%s\n",
		id(s.GetLatestCompleted()), id(s.GetLatestSavepoint()), id(s.GetLatestFailed()))
	if r := s.GetLatestRestored(); r != nil {
		fmt.Fprintf(b, "restored: count=%d #%d savepoint=%t at=%s path=%s\n", n.GetRestored(),
			r.GetId(), r.GetIsSavepoint(), h.fmtMs(r.GetRestoreTimestampMs()), r.GetExternalPath())
	}
}

func (h *harness) detail(b *strings.Builder, id int64) {
	d, ok := h.c.CheckpointDetail(id)
	if !ok {
		fmt.Fprintf(b, "checkpoint %d: not in the history\n", id)
		return
	}
	h.fmtStats(b, d.GetCheckpoint())
	for _, st := range d.GetSubtasks() {
		if !st.GetAcknowledged() {
			fmt.Fprintf(b, "  %s/%d pending", st.GetVertex(), st.GetSubtaskIndex())
			if st.GetDeclined() {
				fmt.Fprintf(b, " declined (%s)", st.GetDeclineMessage())
			}
			if ph := st.GetPhase(); ph != weirv1.CheckpointPhase_CHECKPOINT_PHASE_UNSPECIFIED && !st.GetDeclined() {
				fmt.Fprintf(b, " phase=%s", strings.TrimPrefix(ph.String(), "CHECKPOINT_PHASE_"))
				if st.GetChannels() > 0 {
					fmt.Fprintf(b, " barriers=%d/%d", st.GetBarriersReceived(), st.GetChannels())
				}
				fmt.Fprintf(b, " reported=%s", h.fmtMs(st.GetPhaseReportedMs()))
			}
			b.WriteByte('\n')
			continue
		}
		fmt.Fprintf(b, "  %s/%d acked=%t at=%s e2e=%dms size=%dB sync=%dms async=%dms\n",
			st.GetVertex(), st.GetSubtaskIndex(), st.GetAcknowledged(), h.fmtMs(st.GetAckTimestampMs()),
			st.GetEndToEndDurationMs(), st.GetStateSize(), st.GetMetrics().GetSyncDurationMs(),
			st.GetMetrics().GetAsyncDurationMs())
	}
}

func kindName(k RequestKind) string {
	return [...]string{"periodic", "manual", "savepoint", "stop"}[k]
}

// state prints the coordinator's internals: what a reviewer needs to see
// why the decider did (or did not) run a request.
func (h *harness) state(b *strings.Builder) {
	c := h.c
	fmt.Fprintf(b, "now: %s running: %t\n", h.fmtTime(h.clock.Now()), c.running)
	q := make([]string, len(c.queue))
	for i, r := range c.queue {
		q[i] = fmt.Sprintf("%s/%d", kindName(r.kind), r.seq)
		if r.forced {
			q[i] += "!"
		}
	}
	fmt.Fprintf(b, "queue: [%s]\n", strings.Join(q, " "))
	if c.preparing != nil {
		fmt.Fprintf(b, "preparing: req=%d\n", c.preparing.seq)
	} else {
		b.WriteString("preparing: none\n")
	}
	for _, id := range c.pendingIDs() {
		p := c.pending[id]
		waiting := make([]string, 0, len(p.notYetAcked))
		for _, a := range p.notYetAcked {
			waiting = append(waiting, fmtAttempt(a))
		}
		sort.Strings(waiting)
		fmt.Fprintf(b, "pending #%d req=%d deadline=%s finalizing=%t waiting=[%s]",
			id, p.req.seq, h.fmtTime(p.deadline), p.finalizing, strings.Join(waiting, " "))
		if p.phase != phaseTriggered {
			// Still in the preparation chain.
			fmt.Fprintf(b, " phase=%s", [...]string{"location", "coordinators", "hooks"}[p.phase])
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(b, "last-completion: %s consecutive-failures: %d\n", h.fmtTime(c.lastCompletion), c.consecutive)
	if c.cleaning > 0 {
		fmt.Fprintf(b, "cleaning: %d\n", c.cleaning)
	}
	fmt.Fprintf(b, "next-periodic: %s next-deadline: %s\n", h.fmtTime(c.nextPeriodic), h.fmtTime(c.NextDeadline()))
}

// args reads a directive's arguments and rejects unknown ones.
type args struct {
	t    *testing.T
	td   *datadriven.TestData
	vals map[string][]string
	used map[string]bool
}

func newArgs(t *testing.T, td *datadriven.TestData) *args {
	a := &args{t: t, td: td, vals: map[string][]string{}, used: map[string]bool{}}
	for _, arg := range td.CmdArgs {
		a.vals[arg.Key] = arg.Vals
	}
	return a
}

func (a *args) has(key string) bool {
	_, ok := a.vals[key]
	return ok
}

func (a *args) str(key, def string) string {
	v, ok := a.vals[key]
	a.used[key] = true
	if !ok {
		return def
	}
	return strings.Join(v, ",")
}

// list reads key=a,b,c or key=(a, b, c).
func (a *args) list(key string) []string {
	var out []string
	a.used[key] = true
	for _, v := range a.vals[key] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func (a *args) int(key string, def int64) int64 {
	if !a.has(key) {
		a.used[key] = true
		return def
	}
	n, err := strconv.ParseInt(a.str(key, ""), 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return n
}

func (a *args) dur(key string, def time.Duration) time.Duration {
	if !a.has(key) {
		a.used[key] = true
		return def
	}
	d, err := time.ParseDuration(a.str(key, ""))
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return d
}

// bool reads key (true), key=true or key=false.
func (a *args) bool(key string, def bool) bool {
	v, ok := a.vals[key]
	a.used[key] = true
	if !ok {
		return def
	}
	if len(v) == 0 {
		return true
	}
	b, err := strconv.ParseBool(v[0])
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return b
}

func (a *args) done() {
	for k := range a.vals {
		if !a.used[k] {
			a.t.Fatalf("%s: unknown argument %q to %s", a.td.Pos, k, a.td.Cmd)
		}
	}
}

// TestQueueOverflow fills the request queue to its capacity of 1000 while
// one request is being prepared (so nothing leaves the queue), then adds
// one more: the lowest-priority request, which may be the new one, is
// dropped with TOO_MANY_CHECKPOINT_REQUESTS, which is not a counted failure.
func TestQueueOverflow(t *testing.T) {
	type kind struct {
		kind   RequestKind
		forced bool
	}
	var (
		periodic  = kind{Periodic, false}
		manual    = kind{Manual, false}
		forced    = kind{Manual, true}
		savepoint = kind{Savepoint, true}
	)
	// newest is the last request of the full queue, extra the new one.
	newest := func(newest, extra int64) int64 { return newest }
	theExtra := func(newest, extra int64) int64 { return extra }
	tests := []struct {
		name    string
		fill    kind
		extra   kind
		dropped func(newest, extra int64) int64
	}{
		{"periodic queue, manual arrives: newest periodic dropped", periodic, manual, newest},
		{"periodic queue, periodic arrives: the new one dropped", periodic, periodic, theExtra},
		{"manual queue, manual arrives: the new one dropped", manual, manual, theExtra},
		{"manual queue, forced manual arrives: newest manual dropped", manual, forced, newest},
		{"manual queue, savepoint arrives: newest manual dropped", manual, savepoint, newest},
		{"savepoint queue, periodic arrives: the new one dropped", savepoint, periodic, theExtra},
		{"savepoint queue, savepoint arrives: the new one dropped", savepoint, savepoint, theExtra},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{JobID: "job-1", Timeout: time.Minute, MaxConcurrent: 1, Tolerable: 0},
				&fakeClock{now: epoch}, rand.New(constSource(math.MaxUint64)))
			c.Start([]Task{{Attempt: &weirv1.ExecutionAttemptID{JobId: "job-1", Vertex: "src"}, Source: true}})
			blocker := c.Trigger(Manual, false, "")
			if got := c.Ready(); len(got) != 1 || got[0] != (AllocateID{Request: blocker}) {
				t.Fatalf("first request: got %v, want AllocateID", got)
			}
			var last int64
			for range queueCapacity {
				last = c.Trigger(tc.fill.kind, tc.fill.forced, "")
			}
			if got := c.Ready(); len(got) != 0 {
				t.Fatalf("filling the queue: unexpected effects %v", got)
			}
			extra := c.Trigger(tc.extra.kind, tc.extra.forced, "")
			got := c.Ready()
			if len(got) != 1 {
				t.Fatalf("overflow: got effects %v, want one RequestDone", got)
			}
			done, ok := got[0].(RequestDone)
			var f *Failure
			if !ok || !errors.As(done.Err, &f) ||
				f.Reason != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TOO_MANY_CHECKPOINT_REQUESTS {
				t.Fatalf("overflow: got %#v, want RequestDone failed with TOO_MANY_CHECKPOINT_REQUESTS", got[0])
			}
			if want := tc.dropped(last, extra); done.Request != want {
				t.Errorf("dropped request %d, want %d", done.Request, want)
			}
			if len(c.queue) != queueCapacity {
				t.Errorf("queue holds %d requests, want %d", len(c.queue), queueCapacity)
			}
			for i := 1; i < len(c.queue); i++ {
				if c.queue[i].before(c.queue[i-1]) {
					t.Fatalf("queue out of order at %d", i)
				}
			}
			for _, r := range c.queue {
				if r.seq == done.Request {
					t.Errorf("dropped request %d is still queued", r.seq)
				}
			}
			if c.consecutive != 0 {
				t.Errorf("TOO_MANY_CHECKPOINT_REQUESTS counted as a failure (%d)", c.consecutive)
			}
		})
	}
}

// TestFirstTriggerDelay checks over many seeds that the first periodic
// trigger comes within [min_pause, interval] and that the delays spread.
func TestFirstTriggerDelay(t *testing.T) {
	tests := []struct {
		interval, minPause time.Duration
	}{
		{10 * time.Second, 0},
		{10 * time.Second, 2 * time.Second},
		{time.Second, time.Second},
		{time.Second, 3 * time.Second}, // min_pause > interval: always min_pause
		{time.Millisecond, 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("interval=%s/min-pause=%s", tc.interval, tc.minPause), func(t *testing.T) {
			lo, hi := tc.minPause, max(tc.interval, tc.minPause)
			seen := map[time.Duration]bool{}
			for seed := range uint64(200) {
				c := New(Config{Interval: tc.interval, MinPause: tc.minPause},
					&fakeClock{now: epoch}, rand.New(rand.NewPCG(seed, 0)))
				c.Start(nil)
				d := c.NextDeadline().Sub(epoch)
				if d < lo || d > hi {
					t.Fatalf("seed %d: first trigger after %s, want within [%s, %s]", seed, d, lo, hi)
				}
				seen[d] = true
			}
			if hi > lo && len(seen) < 100 {
				t.Errorf("only %d distinct delays over 200 seeds", len(seen))
			}
			if hi == lo && len(seen) != 1 {
				t.Errorf("%d distinct delays, want exactly %s", len(seen), lo)
			}
		})
	}
}

// err returns the injected error of err=TEXT, nil when absent.
func (a *args) err() error {
	if !a.has("err") {
		return nil
	}
	return errors.New(a.str("err", ""))
}

// namedStates parses states=name:data,name:data.
func (a *args) namedStates(key string) []*weirv1.NamedState {
	var out []*weirv1.NamedState
	for _, kv := range a.list(key) {
		name, data, _ := strings.Cut(kv, ":")
		out = append(out, &weirv1.NamedState{Name: name, Data: []byte(data)})
	}
	return out
}
