package registration

// Scenario tests in the style of the checkpoint coordinator's and the
// scheduler's: every file under testdata/ is a script that drives the
// Member state machine step by step and records, under each command, every
// effect Ready() returned. Regenerate the expected output with
//
//	go test ./internal/registration -run TestScenarios -rewrite
//
// Commands (durations are Go durations; times print relative to the fake
// clock's start, e.g. +1.2s):
//
//	leader ADDR | leader none      LeaderChanged (none: no leader known)
//	advance DURATION               move the clock, then Tick, as the driver
//	                               does when NextDeadline passes
//	elapse DURATION                move the clock without Tick (an RPC
//	                               takes that long); refused when it would
//	                               pass NextDeadline, which the driver
//	                               would have acted on
//	tick                           Tick without moving the clock
//	registered [seq=N] [id=ID] [jm=ID] [interval=D] [timeout=D] [keep=A,B]
//	    [err=TEXT]
//	    Registered: the answer to Register seq (default: the newest RPC);
//	    id, jm, interval and timeout default to r<seq>, jm-1, 1s, 5s; keep
//	    names the subtasks the JobManager adopted.
//	heartbeat-done [seq=N] [reregister] [err=TEXT]
//	    HeartbeatDone: the answer to Heartbeat seq (default: the newest).
//	state                          the member's internal state
//
// After every command the harness prints the effects in order, then
// "next-deadline: ..." whenever NextDeadline changed, and "ignored" when an
// answer was dropped as late. Effects print as
//
//	CancelSubtasks reason="..." [keep=[A B]]
//	Register #SEQ addr=ADDR timeout=D
//	Fence jobmanager=ID registration=ID
//	Heartbeat #SEQ addr=ADDR registration=ID timeout=D
//	Unregistered reason="..."
//
// The harness also checks invariants after every command: at most one RPC
// is outstanding, and it is the newest one sent; every Register goes to the
// known leader; a registration's Fence is followed at once by the cancel of
// what the JobManager did not keep; any other cancel comes only after the
// member went the orphan timeout without a registration; heartbeats go
// only to the leader the member is registered with, and only after the
// Fence of that registration; no RPC goes out while no leader is known; a
// late answer changes nothing; after every event NextDeadline is zero or
// in the future (the driver would spin otherwise).

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// epoch is where every fake clock starts; output is relative to it.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// orphan is the scenarios' orphan timeout.
const orphan = 30 * time.Second

// fakeClock only moves when a test advances it.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{clock: &fakeClock{now: epoch}}
		h.m = New(h.clock, orphan)
		datadriven.RunTest(t, path, h.run)
	})
}

type harness struct {
	clock *fakeClock
	m     *Member

	deadline time.Time // the last printed NextDeadline
	lastSeq  uint64    // the newest RPC sent
	fenced   string    // the registration of the newest Fence
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	t.Helper()
	a := &args{t: t, td: td}
	var b strings.Builder
	event := true
	wasRegistered := h.m.registered
	orphanedAt := h.m.orphanedAt
	switch td.Cmd {
	case "leader":
		addr := a.first()
		if addr == "none" {
			addr = ""
		}
		h.m.LeaderChanged(addr)
	case "advance":
		h.clock.now = h.clock.now.Add(a.firstDuration())
		h.m.Tick()
	case "elapse":
		to := h.clock.now.Add(a.firstDuration())
		if d := h.m.NextDeadline(); !d.IsZero() && !to.Before(d) {
			t.Fatalf("%s: elapse to %s passes the next deadline %s: use advance", td.Pos, h.fmtTime(to), h.fmtTime(d))
		}
		h.clock.now = to
		event = false
	case "tick":
		a.done()
		h.m.Tick()
	case "registered":
		seq := uint64(a.int("seq", int64(h.lastSeq)))
		r := Registration{
			ID:           a.str("id", fmt.Sprintf("r%d", seq)),
			JobManagerID: a.str("jm", "jm-1"),
			Interval:     a.dur("interval", time.Second),
			Timeout:      a.dur("timeout", 5*time.Second),
		}
		if k := a.str("keep", ""); k != "" {
			r.Keep = strings.Split(k, ",")
		}
		err := a.err()
		a.done()
		h.answer(t, td, &b, seq, func() bool { return h.m.Registered(seq, r, err) })
	case "heartbeat-done":
		seq := uint64(a.int("seq", int64(h.lastSeq)))
		reregister := a.bool("reregister")
		err := a.err()
		a.done()
		h.answer(t, td, &b, seq, func() bool { return h.m.HeartbeatDone(seq, reregister, err) })
	case "state":
		a.done()
		h.state(&b)
		event = false
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	h.effects(t, td, &b, wasRegistered, orphanedAt)
	if event {
		// A driver re-arms its timer at NextDeadline after every event: one
		// already passed would make it fire again at once, forever.
		if d := h.m.NextDeadline(); !d.IsZero() && !d.After(h.clock.now) {
			t.Errorf("%s: invariant: next deadline %s is not after now %s", td.Pos, h.fmtTime(d), h.fmtTime(h.clock.now))
		}
	}
	if d := h.m.NextDeadline(); !d.Equal(h.deadline) {
		h.deadline = d
		fmt.Fprintf(&b, "next-deadline: %s\n", h.fmtTime(d))
	}
	h.invariants(t, td)
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

// answer delivers the answer to RPC seq: only the outstanding RPC's may be
// taken, and one the member ignores must leave it exactly as it was.
func (h *harness) answer(t *testing.T, td *datadriven.TestData, b *strings.Builder, seq uint64, deliver func() bool) {
	before := h.snapshot()
	if deliver() {
		if seq != before.inflight {
			t.Errorf("%s: invariant: the answer to #%d was taken while #%d was outstanding", td.Pos, seq, before.inflight)
		}
		return
	}
	b.WriteString("ignored\n")
	if after := h.snapshot(); !reflect.DeepEqual(before, after) {
		t.Errorf("%s: invariant: an ignored answer changed the member:\n before %+v\n after  %+v", td.Pos, before, after)
	}
	if len(h.m.effects) > 0 {
		t.Errorf("%s: invariant: an ignored answer had effects: %v", td.Pos, h.m.effects)
	}
}

func (h *harness) snapshot() Member {
	s := *h.m
	s.effects = nil
	return s
}

// effects prints Ready() and checks each effect against the member's state
// after the command.
func (h *harness) effects(t *testing.T, td *datadriven.TestData, b *strings.Builder, wasRegistered bool, orphanedAt time.Time) {
	fail := func(format string, args ...any) {
		t.Errorf("%s: invariant: %s", td.Pos, fmt.Sprintf(format, args...))
	}
	effects := h.m.Ready()
	rpcs := 0
	for i, e := range effects {
		switch e := e.(type) {
		case CancelSubtasks:
			fmt.Fprintf(b, "CancelSubtasks reason=%q", e.Reason)
			if len(e.Keep) > 0 {
				fmt.Fprintf(b, " keep=%v", e.Keep)
			}
			b.WriteString("\n")
			afterFence := i > 0 && reflect.TypeOf(effects[i-1]) == reflect.TypeOf(Fence{})
			orphaned := !orphanedAt.IsZero() && !h.clock.now.Before(orphanedAt.Add(orphan))
			if !afterFence && !orphaned {
				fail("subtasks cancelled neither after a registration nor after the orphan timeout")
			}
		case Register:
			fmt.Fprintf(b, "Register #%d addr=%s timeout=%v\n", e.Seq, e.Addr, e.Timeout)
			rpcs++
			h.sent(fail, e.Seq)
			if e.Addr == "" || e.Addr != h.m.leader {
				fail("Register #%d to %q while the leader is %q", e.Seq, e.Addr, h.m.leader)
			}
		case Fence:
			fmt.Fprintf(b, "Fence jobmanager=%s registration=%s\n", e.JobManagerID, e.Registration)
			h.fenced = e.Registration
			if i+1 >= len(effects) || reflect.TypeOf(effects[i+1]) != reflect.TypeOf(CancelSubtasks{}) {
				fail("Fence %s not followed by the cancel of what was not kept", e.Registration)
			}
		case Heartbeat:
			fmt.Fprintf(b, "Heartbeat #%d addr=%s registration=%s timeout=%v\n", e.Seq, e.Addr, e.Registration, e.Timeout)
			rpcs++
			h.sent(fail, e.Seq)
			if !h.m.registered || e.Registration != h.m.reg.ID {
				fail("Heartbeat #%d for %q while registered=%t as %q", e.Seq, e.Registration, h.m.registered, h.m.reg.ID)
			}
			if e.Registration != h.fenced {
				fail("Heartbeat #%d for %q before its Fence (fenced: %q)", e.Seq, e.Registration, h.fenced)
			}
			if e.Addr == "" || e.Addr != h.m.leader || e.Addr != h.m.addr {
				fail("Heartbeat #%d to %q; leader %q, registered at %q", e.Seq, e.Addr, h.m.leader, h.m.addr)
			}
		case Unregistered:
			fmt.Fprintf(b, "Unregistered reason=%q\n", e.Reason)
			if !wasRegistered {
				fail("Unregistered while not registered")
			}
		default:
			fail("unknown effect %T", e)
		}
	}
	if rpcs > 1 {
		fail("%d RPCs sent in one step", rpcs)
	}
	if rpcs == 1 && h.m.inflight != h.lastSeq {
		fail("sent #%d but awaits #%d", h.lastSeq, h.m.inflight)
	}
}

// sent records an RPC; sequence numbers only grow, so that an answer names
// exactly one of them.
func (h *harness) sent(fail func(string, ...any), seq uint64) {
	if seq <= h.lastSeq {
		fail("RPC #%d after #%d", seq, h.lastSeq)
	}
	h.lastSeq = seq
}

func (h *harness) invariants(t *testing.T, td *datadriven.TestData) {
	m := h.m
	fail := func(format string, args ...any) {
		t.Errorf("%s: invariant: %s", td.Pos, fmt.Sprintf(format, args...))
	}
	if m.inflight != 0 && m.inflight != h.lastSeq {
		fail("awaits #%d, but #%d was sent after it", m.inflight, h.lastSeq)
	}
	if (m.inflight == 0) != (m.kind == noRPC) {
		fail("outstanding #%d of kind %d", m.inflight, m.kind)
	}
	if m.registered && m.leader != "" && m.leader != m.addr {
		fail("registered at %s while %s leads", m.addr, m.leader)
	}
	if m.registered && h.fenced != m.reg.ID {
		fail("registered as %q but fenced for %q", m.reg.ID, h.fenced)
	}
	if m.kind == heartbeatRPC && !m.registered {
		fail("a heartbeat is outstanding while unregistered")
	}
	if m.kind == registerRPC && m.registered {
		fail("a registration is outstanding while registered")
	}
}

func (h *harness) state(b *strings.Builder) {
	m := h.m
	leader := m.leader
	if leader == "" {
		leader = "none"
	}
	fmt.Fprintf(b, "leader=%s addr=%s registered=%t\n", leader, m.addr, m.registered)
	if !m.orphanedAt.IsZero() {
		fmt.Fprintf(b, "orphaned-since=%s\n", h.fmtTime(m.orphanedAt))
	}
	if m.registered {
		fmt.Fprintf(b, "registration=%s jobmanager=%s interval=%v timeout=%v last-ok=%s next-heartbeat=%s\n",
			m.reg.ID, m.reg.JobManagerID, m.reg.Interval, m.reg.Timeout, h.fmtTime(m.lastOK), h.fmtTime(m.heartbeatAt))
	} else {
		fmt.Fprintf(b, "next-registration=%s\n", h.fmtTime(m.registerAt))
	}
	switch m.kind {
	case registerRPC:
		fmt.Fprintf(b, "outstanding: Register #%d\n", m.inflight)
	case heartbeatRPC:
		fmt.Fprintf(b, "outstanding: Heartbeat #%d\n", m.inflight)
	}
}

func (h *harness) fmtTime(t time.Time) string {
	switch {
	case t.IsZero():
		return "none"
	case t.Before(epoch):
		return "-" + epoch.Sub(t).String()
	}
	return "+" + t.Sub(epoch).String()
}

// args reads a command's arguments and fails on any left unread.
type args struct {
	t    *testing.T
	td   *datadriven.TestData
	used map[string]bool
}

func (a *args) get(key string) (string, bool) {
	if a.used == nil {
		a.used = map[string]bool{}
	}
	for _, arg := range a.td.CmdArgs {
		if arg.Key == key {
			a.used[key] = true
			return strings.Join(arg.Vals, ","), true
		}
	}
	return "", false
}

// first is the command's only argument, a bare word.
func (a *args) first() string {
	if len(a.td.CmdArgs) != 1 || len(a.td.CmdArgs[0].Vals) != 0 {
		a.t.Fatalf("%s: usage: %s VALUE", a.td.Pos, a.td.Cmd)
	}
	return a.td.CmdArgs[0].Key
}

func (a *args) firstDuration() time.Duration {
	d, err := time.ParseDuration(a.first())
	if err != nil {
		a.t.Fatalf("%s: %v", a.td.Pos, err)
	}
	return d
}

func (a *args) str(key, def string) string {
	if v, ok := a.get(key); ok {
		return v
	}
	return def
}

func (a *args) int(key string, def int64) int64 {
	v, ok := a.get(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return n
}

func (a *args) dur(key string, def time.Duration) time.Duration {
	v, ok := a.get(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return d
}

func (a *args) bool(key string) bool {
	v, ok := a.get(key)
	if !ok {
		return false
	}
	if v == "" {
		return true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return b
}

func (a *args) err() error {
	if v, ok := a.get("err"); ok {
		return errors.New(v)
	}
	return nil
}

// done fails the test on an argument no one read: a typo must not pass as
// a default.
func (a *args) done() {
	for _, arg := range a.td.CmdArgs {
		if !a.used[arg.Key] {
			a.t.Fatalf("%s: unknown argument %q", a.td.Pos, arg.Key)
		}
	}
}
