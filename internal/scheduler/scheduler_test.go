package scheduler

// Scenario tests in the style of the checkpoint coordinator's: every file
// under testdata/ drives the Job state machine step by step and records,
// under each command, every effect Ready() returned. Regenerate with
//
//	go test ./internal/scheduler -run TestScenarios -rewrite
//
// Commands:
//
//	job [strategy=none|fixed|exponential] [attempts=N] [delay=D]
//	    [initial=D] [max=D] [multiplier=F] [reset=D] [adopt=D]
//	    [on=TM]
//	    adopt: a new leader's job, adopting attempt #7 of session "old"
//	    of every subtask within D, recorded as deployed to TM (none: not
//	    said)
//	  vertex lines, one per line: NAME p=N [from=SRC:PARTITIONER]
//	    [group=SLOT-SHARING-GROUP]
//	    a new job; prints its regions and the slots it needs.
//	need                       NextSlotRequest
//	offer tms=tm1,tm2          SlotsOffered
//	task V/I state=STATE [attempt=A] [cause=TEXT]
//	running [tms=...]          every SCHEDULED subtask (on those
//	                           TaskManagers) reports RUNNING
//	lost tm=ID [cause=TEXT]    TaskManagerLost
//	fail cause=TEXT            Fail (a failure of the whole job)
//	advance D                  move the clock, then fire the restart
//	                           timers that are due, as the driver does
//	restored restart=N [err=TEXT]    RestoreReady
//	end-of-input V/I [attempt=A]
//	finishing                  Finishing (a checkpoint that ends the
//	                           subtasks completed)
//	rescale V=N ...            Rescale to these parallelisms
//	cancel / suspend
//	view                       the job's state, subtasks and exceptions
//	report tm=ID V/I... [state=STATE] [attempt=A] [eoi] [stopping]
//	                           Report: a TaskManager reports these
//	                           subtasks' recorded attempts (or attempt A)
//
// After every command the harness checks invariants: each subtask has one
// current attempt; a region is in at most one restart; live subtasks in
// one slot run on one TaskManager; a job that ended has no live subtask;
// checkpoints run only while every subtask runs.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/restart"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, h.run)
	})
}

type harness struct {
	clock  *fakeClock
	j      *Job
	timers map[int64]time.Time
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	if td.Cmd != "job" && h.j == nil {
		t.Fatalf("%s: job must come first", td.Pos)
	}
	var b strings.Builder
	arg := func(key string) (string, bool) {
		for _, a := range td.CmdArgs {
			if a.Key == key {
				return strings.Join(a.Vals, ","), true
			}
		}
		return "", false
	}
	str := func(key, def string) string {
		if v, ok := arg(key); ok {
			return v
		}
		return def
	}
	dur := func(key string, def time.Duration) time.Duration {
		v, ok := arg(key)
		if !ok {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %s: %v", td.Pos, key, err)
		}
		return d
	}
	num := func(key string, def int) int {
		v, ok := arg(key)
		if !ok {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: %s: %v", td.Pos, key, err)
		}
		return n
	}
	// The first argument without a value names a subtask: V/I.
	attempt := func() *weirv1.ExecutionAttemptID {
		if len(td.CmdArgs) == 0 || len(td.CmdArgs[0].Vals) != 0 {
			t.Fatalf("%s: name the subtask first: V/I", td.Pos)
		}
		name := td.CmdArgs[0].Key
		v, i, ok := strings.Cut(name, "/")
		idx, err := strconv.Atoi(i)
		if !ok || err != nil {
			t.Fatalf("%s: bad subtask %q", td.Pos, name)
		}
		for _, e := range h.j.execs {
			if e.Attempt.GetVertex() == v && e.Attempt.GetSubtaskIndex() == int32(idx) {
				a := proto.Clone(e.Attempt).(*weirv1.ExecutionAttemptID)
				if n := num("attempt", -1); n >= 0 {
					a.Attempt = int32(n)
				}
				return a
			}
		}
		t.Fatalf("%s: no subtask %q", td.Pos, name)
		return nil
	}

	switch td.Cmd {
	case "job":
		g := &weirv1.JobGraph{Name: "job", MaxParallelism: 128}
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			f := strings.Fields(line)
			v := &weirv1.JobVertex{Name: f[0], Parallelism: 1}
			for _, kv := range f[1:] {
				k, val, _ := strings.Cut(kv, "=")
				switch k {
				case "p":
					p, _ := strconv.Atoi(val)
					v.Parallelism = int32(p)
				case "group":
					v.SlotSharingGroup = val
				case "from":
					for _, in := range strings.Split(val, ",") {
						src, part, _ := strings.Cut(in, ":")
						e := &weirv1.JobEdge{Source: src, Partitioner: weirv1.Partitioner_PARTITIONER_HASH}
						if part == "forward" {
							e.Partitioner = weirv1.Partitioner_PARTITIONER_FORWARD
						}
						v.Inputs = append(v.Inputs, e)
					}
				default:
					t.Fatalf("%s: unknown vertex key %q", td.Pos, k)
				}
			}
			g.Vertices = append(g.Vertices, v)
		}
		spec := &weirv1.RestartStrategy{}
		switch str("strategy", "fixed") {
		case "none":
		case "fixed":
			spec.Kind = weirv1.RestartStrategy_KIND_FIXED_DELAY
			spec.Attempts = int32(num("attempts", 3))
			spec.Delay = durationpb.New(dur("delay", time.Second))
		case "exponential":
			spec.Kind = weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY
			spec.Attempts = int32(num("attempts", 0))
			spec.InitialBackoff = durationpb.New(dur("initial", time.Second))
			spec.MaxBackoff = durationpb.New(dur("max", 10*time.Second))
			m, _ := strconv.ParseFloat(str("multiplier", "2"), 64)
			spec.Multiplier = m
			spec.ResetBackoffThreshold = durationpb.New(dur("reset", time.Minute))
		default:
			t.Fatalf("%s: unknown strategy", td.Pos)
		}
		h.clock = &fakeClock{now: epoch}
		h.timers = map[int64]time.Time{}
		cfg := Config{JobID: "j", Session: "s", Graph: g, Strategy: restart.New(spec, restart.Budget{}, h.clock.Now())}
		if _, ok := arg("adopt"); ok {
			ad := &Adoption{Window: dur("adopt", 0)}
			for _, v := range g.Vertices {
				for i := range v.Parallelism {
					ad.Attempts = append(ad.Attempts, Placed{Attempt: &weirv1.ExecutionAttemptID{JobId: "j", Vertex: v.Name, SubtaskIndex: i, Attempt: 7, Session: "old"}, TaskManager: str("on", "")})
				}
			}
			cfg.Adopt = ad
		}
		j, err := New(cfg, h.clock)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		j.StartAdoption()
		h.j = j
		regions := map[int][]string{}
		for _, e := range j.execs {
			regions[e.Region] = append(regions[e.Region], subtaskName(e))
		}
		for r := range j.regions {
			fmt.Fprintf(&b, "region %d: %s\n", r, strings.Join(regions[r], " "))
		}
		fmt.Fprintf(&b, "slots needed: %d\n", SlotsNeeded(g))
	case "need":
		prefer, waiting := h.j.NextSlotRequest()
		fmt.Fprintf(&b, "waiting=%t slots=%d\n", waiting, len(prefer))
		if slices.ContainsFunc(prefer, func(tm string) bool { return tm != "" }) {
			fmt.Fprintf(&b, "prefer %s\n", strings.Join(prefer, ","))
		}
	case "offer":
		var tms []string
		if v := str("tms", ""); v != "" {
			tms = strings.Split(v, ",")
		}
		if err := h.j.SlotsOffered(tms); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
	case "task":
		a := attempt()
		st := parseExecState(t, str("state", ""))
		if !h.j.TaskStateChanged(a, st, str("cause", "")) {
			b.WriteString("unknown attempt\n")
		}
	case "running":
		var only []string
		if v := str("tms", ""); v != "" {
			only = strings.Split(v, ",")
		}
		for _, e := range slices.Clone(h.j.execs) {
			if e.State == weirv1.ExecutionState_EXECUTION_STATE_SCHEDULED && (only == nil || slices.Contains(only, e.TaskManager)) {
				h.j.TaskStateChanged(e.Attempt, weirv1.ExecutionState_EXECUTION_STATE_RUNNING, "")
			}
		}
	case "lost":
		h.j.TaskManagerLost(str("tm", ""), str("cause", "taskmanager lost"))
	case "fail":
		h.j.Fail(str("cause", "failed"))
	case "advance":
		if len(td.CmdArgs) != 1 {
			t.Fatalf("%s: usage: advance DURATION", td.Pos)
		}
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		h.clock.now = h.clock.now.Add(d)
		for _, id := range sortedKeys(h.timers) {
			if !h.clock.now.Before(h.timers[id]) {
				delete(h.timers, id)
				if id == adoptionTimer {
					h.j.AdoptionDue()
				} else {
					h.j.RestartDue(id)
				}
			}
		}
	case "restored":
		var err error
		if msg := str("err", ""); msg != "" {
			err = fmt.Errorf("%s", msg)
		}
		h.j.RestoreReady(int64(num("restart", -1)), err)
	case "end-of-input":
		if !h.j.EndOfInput(attempt()) {
			b.WriteString("unknown or stopped attempt\n")
		}
	case "finishing":
		h.j.Finishing()
	case "rescale":
		g := proto.Clone(h.j.cfg.Graph).(*weirv1.JobGraph)
		for _, a := range td.CmdArgs {
			for _, v := range g.Vertices {
				if v.Name == a.Key {
					p, _ := strconv.Atoi(a.Vals[0])
					v.Parallelism = int32(p)
				}
			}
		}
		if err := h.j.Rescale(g); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
	case "cancel":
		if err := h.j.Cancel(); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
	case "suspend":
		h.j.Suspend()
	case "view":
		h.view(&b)
	case "report":
		st := parseExecState(t, str("state", "running"))
		_, eoi := arg("eoi")
		_, stopping := arg("stopping")
		for _, a := range td.CmdArgs {
			if !strings.Contains(a.Key, "/") || len(a.Vals) != 0 {
				continue
			}
			v, i, _ := strings.Cut(a.Key, "/")
			idx, _ := strconv.Atoi(i)
			at := &weirv1.ExecutionAttemptID{JobId: "j", Vertex: v, SubtaskIndex: int32(idx), Attempt: int32(num("attempt", 7)), Session: "old"}
			keep, known := h.j.Report(str("tm", ""), AttemptReport{Attempt: at, State: st, EndOfInput: eoi, Stopping: stopping})
			fmt.Fprintf(&b, "%s keep=%t known=%t\n", a.Key, keep, known)
		}
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	for _, e := range h.j.Ready() {
		b.WriteString(h.format(e))
		b.WriteString("\n")
	}
	h.invariants(t, td)
	return b.String()
}

// adoptionTimer is the adoption's deadline among the harness's timers.
const adoptionTimer = -1

func sortedKeys(m map[int64]time.Time) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func parseExecState(t *testing.T, s string) weirv1.ExecutionState {
	v, ok := weirv1.ExecutionState_value["EXECUTION_STATE_"+strings.ToUpper(s)]
	if !ok {
		t.Fatalf("unknown execution state %q", s)
	}
	return weirv1.ExecutionState(v)
}

func subtaskName(e *Exec) string {
	return fmt.Sprintf("%s/%d", e.Attempt.GetVertex(), e.Attempt.GetSubtaskIndex())
}

func execString(e Exec) string {
	s := fmt.Sprintf("%s#%d", subtaskName(&e), e.Attempt.GetAttempt())
	if e.TaskManager != "" {
		s += "@" + e.TaskManager
	}
	return s
}

func execList(es []Exec) string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, execString(e))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func (h *harness) rel(t time.Time) string {
	return "+" + t.Sub(epoch).String()
}

func (h *harness) format(e Effect) string {
	switch e := e.(type) {
	case StateChanged:
		return fmt.Sprintf("StateChanged %s -> %s", e.From.FlinkName(), e.To.FlinkName())
	case Deploy:
		return fmt.Sprintf("Deploy restart=%d %s", e.Restart, execList(e.Execs))
	case CancelTasks:
		return fmt.Sprintf("CancelTasks %s", execList(e.Execs))
	case StartCheckpoints:
		if e.Soon {
			return fmt.Sprintf("StartCheckpoints soon %s", execList(e.Tasks))
		}
		return fmt.Sprintf("StartCheckpoints %s", execList(e.Tasks))
	case StopCheckpoints:
		return fmt.Sprintf("StopCheckpoints reason=%s", strings.TrimPrefix(e.Reason.String(), "CHECKPOINT_FAILURE_REASON_"))
	case TaskFinished:
		return fmt.Sprintf("TaskFinished %s/%d#%d", e.Attempt.GetVertex(), e.Attempt.GetSubtaskIndex(), e.Attempt.GetAttempt())
	case RestartStarted:
		return fmt.Sprintf("RestartStarted restart=%d regions=%v full=%t delay=%v rescale=%t cause=%q", e.Restart, e.Regions, e.Full, e.Delay, e.Rescale, e.Cause)
	case PersistStatus:
		return fmt.Sprintf("PersistStatus restarts=%d used=%d", e.Restarts, e.Budget.Used)
	case ArmTimer:
		h.timers[e.Restart] = e.At
		return fmt.Sprintf("ArmTimer restart=%d at=%s", e.Restart, h.rel(e.At))
	case PrepareRestore:
		return fmt.Sprintf("PrepareRestore restart=%d full=%t", e.Restart, e.Full)
	case AwaitSlots:
		return fmt.Sprintf("AwaitSlots restart=%d", e.Restart)
	case FinalCheckpoint:
		return fmt.Sprintf("FinalCheckpoint generation=%d", e.Generation)
	case Terminated:
		return fmt.Sprintf("Terminated %s", e.State.FlinkName())
	case ArmAdoption:
		h.timers[adoptionTimer] = e.At
		return fmt.Sprintf("ArmAdoption at=%s", h.rel(e.At))
	case Adopted:
		return fmt.Sprintf("Adopted %s", execList(e.Execs))
	}
	return fmt.Sprintf("%T %+v", e, e)
}

func (h *harness) view(b *strings.Builder) {
	v := h.j.View()
	fmt.Fprintf(b, "state=%s restarts=%d generation=%d restarting=%v\n", v.State.FlinkName(), v.Restarts, v.Generation, v.Restarting)
	if v.Cause != "" {
		fmt.Fprintf(b, "cause: %s\n", v.Cause)
	}
	for _, e := range v.Execs {
		st := strings.TrimPrefix(e.State.String(), "EXECUTION_STATE_")
		fmt.Fprintf(b, "  %s region=%d slot=%s %s", execString(e), e.Region, e.Slot, st)
		if e.EndOfInput {
			b.WriteString(" end-of-input")
		}
		b.WriteString("\n")
	}
	held := v.SlotsHeld()
	tms := make([]string, 0, len(held))
	for tm := range held {
		tms = append(tms, tm)
	}
	slices.Sort(tms)
	for _, tm := range tms {
		fmt.Fprintf(b, "  slots held on %s: %d\n", tm, held[tm])
	}
	for _, ex := range v.Exceptions {
		fmt.Fprintf(b, "  exception %s task=%q tm=%q regions=%v full=%t: %s\n", h.rel(ex.Time), ex.Task, ex.TaskManager, ex.Regions, ex.Full, ex.Cause)
	}
}

func (h *harness) invariants(t *testing.T, td *datadriven.TestData) {
	t.Helper()
	j := h.j
	fail := func(format string, args ...any) {
		t.Fatalf("%s: invariant: %s", td.Pos, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	slotTM := map[SlotKey]string{}
	for _, e := range j.execs {
		n := subtaskName(e)
		if seen[n] {
			fail("subtask %s has two current attempts", n)
		}
		seen[n] = true
		if !e.Terminal() && e.TaskManager != "" {
			if tm, ok := slotTM[e.Slot]; ok && tm != e.TaskManager {
				fail("slot %s is on %s and %s", e.Slot, tm, e.TaskManager)
			}
			slotTM[e.Slot] = e.TaskManager
		}
		if Terminal(j.state) && j.state != weirv1.JobState_JOB_STATE_SUSPENDED && !e.Terminal() && e.State != weirv1.ExecutionState_EXECUTION_STATE_CREATED {
			fail("job is %s but %s is %s", j.state.FlinkName(), n, e.State)
		}
		if j.checkpoints && e.State != weirv1.ExecutionState_EXECUTION_STATE_RUNNING && e.State != weirv1.ExecutionState_EXECUTION_STATE_FINISHED {
			fail("checkpoints run while %s is %s", n, e.State)
		}
	}
	for r, id := range j.busy {
		p, ok := j.pending[id]
		if !ok || !p.regions[r] {
			fail("region %d is busy with restart %d, which does not hold it", r, id)
		}
	}
	for id, p := range j.pending {
		for r := range p.regions {
			if j.busy[r] != id {
				fail("restart %d holds region %d, which is busy with %d", id, r, j.busy[r])
			}
		}
	}
	if Terminal(j.state) && len(j.pending) > 0 {
		fail("job is %s with restarts pending", j.state.FlinkName())
	}
	full := false
	for _, p := range j.pending {
		full = full || (p.full && p.id > 0)
	}
	if full != (j.state == weirv1.JobState_JOB_STATE_RESTARTING) {
		fail("state %s with a whole-job restart pending: %t", j.state.FlinkName(), full)
	}
}

func TestMatchSlots(t *testing.T) {
	for _, c := range []struct {
		free, prefer, want []string
	}{
		{free: []string{"a", "b", "a", "b"}, prefer: []string{"a", "a", "b", "b"}, want: []string{"a", "a", "b", "b"}},
		// A TaskManager without a slot left gives way to the next free.
		{free: []string{"a", "b", "c"}, prefer: []string{"a", "a", ""}, want: []string{"a", "b", "c"}},
		{free: []string{"a", "b"}, prefer: []string{"", "gone"}, want: []string{"a", "b"}},
		{free: []string{"a", "b"}, prefer: []string{"", "a"}, want: []string{"b", "a"}},
		{free: []string{"a"}, prefer: []string{"a", "a"}, want: nil},
		// Slots without a preference spread over the TaskManagers, as
		// free lists them, not onto the first one's.
		{free: []string{"a", "b", "c", "a", "b", "c"}, prefer: []string{"", "", ""}, want: []string{"a", "b", "c"}},
		{free: []string{"a", "b", "a", "b"}, prefer: []string{"a", ""}, want: []string{"a", "b"}},
	} {
		got, ok := MatchSlots(c.free, c.prefer)
		if !slices.Equal(got, c.want) || ok != (c.want != nil) {
			t.Errorf("MatchSlots(%v, %v) = %v %v, want %v", c.free, c.prefer, got, ok, c.want)
		}
	}
}
