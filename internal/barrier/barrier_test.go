package barrier

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestBarrierHandler runs the scenarios in testdata/barrier. Commands:
//
//	new channels=<n> mode=<mode> [timeout=<duration>] [max-pending=<n>]
//	barrier ch=<i> id=<checkpoint> [ts=<ms>] [unaligned] [savepoint]
//	cancel ch=<i> id=<checkpoint>
//	abort id=<checkpoint>            the JobManager aborted it (OnAbort)
//	eop ch=<i>
//	tick d=<duration>
//	state
//	orders channels=<n> mode=<mode> [timeout=<duration>] [eop=<i>]
//
// Modes: aligned (alias exactly-once), at-least-once, unaligned,
// aligned-timeout. Barriers carry no options, so the handler's mode
// applies, unless the barrier is marked unaligned (what a subtask that went
// unaligned forwards) or savepoint (always aligned). The clock starts at 0
// and only tick moves it; tick feeds the handler its timer.
//
// Every event prints the Decision (or the error) followed by the handler's
// state: the checkpoints in progress, the blocked channels, the channels
// being recorded as channel state and the timeout deadline, if any.
// max-pending caps the at-least-once checkpoints tracked at once.
//
// After every event the harness checks the invariants of the handler (see
// invariants.check), so every scenario, orders included, exercises them.
//
// orders runs checkpoint 1 through a fresh handler once for every order in
// which its barriers can arrive on the n channels (with eop, the event on
// that channel is its end of partition instead), one line per order:
// each event as channel:decision followed by the channels blocked (b=) and
// recorded (r=) afterwards.
func TestBarrierHandler(t *testing.T) {
	datadriven.Walk(t, "testdata/barrier", func(t *testing.T, path string) {
		var (
			h     *Handler
			n     int
			clock time.Duration
			mode  Mode
			inv   *invariants
		)
		base := time.Unix(1000, 0)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && d.Cmd != "orders" && h == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			var (
				dec Decision
				err error
			)
			now := base.Add(clock)
			switch d.Cmd {
			case "new":
				var timeout time.Duration
				d.ScanArgs(t, "channels", &n)
				mode, timeout = scanMode(t, d)
				h = New(n, mode, timeout)
				if d.HasArg("max-pending") {
					d.ScanArgs(t, "max-pending", &h.maxPending)
				}
				inv = newInvariants(h)
				clock = 0
				return formatState(h, n, base, clock)
			case "barrier":
				var ch int
				var id, ts int64
				d.ScanArgs(t, "ch", &ch)
				d.ScanArgs(t, "id", &id)
				if d.HasArg("ts") {
					d.ScanArgs(t, "ts", &ts)
				}
				b := &weirv1.CheckpointBarrier{CheckpointId: id, TimestampMs: ts}
				switch {
				case d.HasArg("unaligned"):
					b.Options = &weirv1.CheckpointOptions{ExactlyOnce: true, Unaligned: true}
				case d.HasArg("savepoint"):
					b.Options = &weirv1.CheckpointOptions{ExactlyOnce: true, Unaligned: mode == ModeUnaligned || mode == ModeAlignedTimeout, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT}
				}
				dec, err = h.OnBarrier(ch, b, now)
			case "cancel":
				var ch int
				var id int64
				d.ScanArgs(t, "ch", &ch)
				d.ScanArgs(t, "id", &id)
				dec, err = h.OnCancelMarker(ch, id)
			case "abort":
				var id int64
				d.ScanArgs(t, "id", &id)
				dec = h.OnAbort(id)
			case "eop":
				var ch int
				d.ScanArgs(t, "ch", &ch)
				dec, err = h.OnEndOfPartition(ch)
			case "tick":
				var s string
				d.ScanArgs(t, "d", &s)
				dur, perr := time.ParseDuration(s)
				if perr != nil {
					d.Fatalf(t, "tick: %v", perr)
				}
				clock += dur
				dec = h.OnTimer(base.Add(clock))
			case "state":
				return formatState(h, n, base, clock)
			case "orders":
				return runOrders(t, d)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			if msg := inv.check(dec, err); msg != "" {
				t.Errorf("%s: %s: invariant broken: %s", d.Pos, d.Cmd, msg)
			}
			var b strings.Builder
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
			} else {
				b.WriteString("decision: " + formatDecision(dec) + "\n")
			}
			b.WriteString(formatState(h, n, base, clock))
			return b.String()
		})
	})
}

func scanMode(t *testing.T, d *datadriven.TestData) (Mode, time.Duration) {
	var name string
	d.ScanArgs(t, "mode", &name)
	var timeout time.Duration
	if d.HasArg("timeout") {
		var s string
		d.ScanArgs(t, "timeout", &s)
		var err error
		if timeout, err = time.ParseDuration(s); err != nil {
			d.Fatalf(t, "timeout: %v", err)
		}
	}
	mode, timeout, err := ParseMode(name, timeout)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return mode, timeout
}

// runOrders runs checkpoint 1 in every arrival order (see TestBarrierHandler).
func runOrders(t *testing.T, d *datadriven.TestData) string {
	var n int
	d.ScanArgs(t, "channels", &n)
	mode, timeout := scanMode(t, d)
	eop := -1
	if d.HasArg("eop") {
		d.ScanArgs(t, "eop", &eop)
	}
	chans := make([]int, n)
	for i := range chans {
		chans[i] = i
	}
	now := time.Unix(1000, 0)
	var out strings.Builder
	for _, order := range permutations(chans) {
		h := New(n, mode, timeout)
		inv := newInvariants(h)
		var steps []string
		for _, ch := range order {
			var (
				dec Decision
				err error
			)
			if ch == eop {
				dec, err = h.OnEndOfPartition(ch)
			} else {
				dec, err = h.OnBarrier(ch, &weirv1.CheckpointBarrier{CheckpointId: 1}, now)
			}
			if err != nil {
				d.Fatalf(t, "order %v: %v", order, err)
			}
			if msg := inv.check(dec, nil); msg != "" {
				t.Errorf("%s: order %v: invariant broken: %s", d.Pos, order, msg)
			}
			step := fmt.Sprintf("%d:%s", ch, compactDecision(dec))
			if ch == eop {
				step = fmt.Sprintf("%d(eop):%s", ch, compactDecision(dec))
			}
			if s := compactState(h, n); s != "" {
				step += " " + s
			}
			steps = append(steps, step)
		}
		fmt.Fprintf(&out, "%s\n", strings.Join(steps, " | "))
	}
	return out.String()
}

func permutations(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{append([]int(nil), xs...)}
	}
	var out [][]int
	for i, x := range xs {
		rest := append(append([]int(nil), xs[:i]...), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]int{x}, p...))
		}
	}
	return out
}

func formatDecision(d Decision) string {
	var parts []string
	if d.Aborted != 0 {
		parts = append(parts, fmt.Sprintf("aborted=%s reason=%s", formatIDs(abortedBeforeCancelled(d)),
			strings.TrimPrefix(d.AbortReason.String(), "CHECKPOINT_FAILURE_REASON_")))
	} else if d.AbortReason != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_UNSPECIFIED {
		parts = append(parts, "reason-without-abort="+d.AbortReason.String())
	}
	if d.Cancelled != 0 {
		parts = append(parts, fmt.Sprintf("cancelled=%d", d.Cancelled))
	}
	if d.Started != 0 {
		parts = append(parts, fmt.Sprintf("started=%d", d.Started))
	}
	if d.TimedOut {
		parts = append(parts, "timed-out")
	}
	if d.Snapshot != nil {
		s := fmt.Sprintf("snapshot=%d", d.Snapshot.GetCheckpointId())
		if ts := d.Snapshot.GetTimestampMs(); ts != 0 {
			s += fmt.Sprintf("@%d", ts)
		}
		if d.Unaligned {
			s += " unaligned"
			if m, _ := ModeOf(d.Snapshot.GetOptions()); m != ModeUnaligned {
				s += "(but the forwarded barrier is not!)"
			}
		}
		parts = append(parts, s)
	} else if d.Unaligned {
		parts = append(parts, "unaligned-without-snapshot")
	}
	if d.Completed != 0 {
		parts = append(parts, fmt.Sprintf("completed=%d", d.Completed))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func compactDecision(d Decision) string {
	var parts []string
	if d.Aborted != 0 {
		parts = append(parts, "aborted="+formatIDs(abortedBeforeCancelled(d)))
	}
	if d.Started != 0 {
		parts = append(parts, "started")
	}
	if d.Snapshot != nil {
		if d.Unaligned {
			parts = append(parts, "snapshot(unaligned)")
		} else {
			parts = append(parts, "snapshot")
		}
	}
	if d.Completed != 0 {
		parts = append(parts, "completed")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func channels(n int, f func(int) bool) string {
	var out []string
	for ch := range n {
		if f(ch) {
			out = append(out, fmt.Sprint(ch))
		}
	}
	return strings.Join(out, ",")
}

func compactState(h *Handler, n int) string {
	var parts []string
	if b := channels(n, h.Blocked); b != "" {
		parts = append(parts, "b="+b)
	}
	if r := channels(n, h.Recording); r != "" {
		parts = append(parts, "r="+r)
	}
	return strings.Join(parts, " ")
}

func formatState(h *Handler, n int, base time.Time, clock time.Duration) string {
	b := channels(n, h.Blocked)
	if b == "" {
		b = "none"
	}
	a := "none"
	if ids := h.InProgress(); len(ids) > 0 {
		a = formatIDs(ids)
	}
	s := fmt.Sprintf("aligning: %s blocked: %s", a, b)
	if h.Unaligned() {
		r := channels(n, h.Recording)
		if r == "" {
			r = "none"
		}
		s += " recording: " + r
	}
	if dl, ok := h.Deadline(); ok {
		s += fmt.Sprintf(" timeout-in: %v", dl.Sub(base.Add(clock)))
	}
	return s + "\n"
}

// abortedBeforeCancelled is what d gives up besides Cancelled.
func abortedBeforeCancelled(d Decision) []int64 {
	ids := d.AbortedIDs()
	if d.Cancelled != 0 {
		ids = ids[:len(ids)-1]
	}
	return ids
}

func formatIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// invariants follows one handler through its events and checks what any
// sequence of events must keep, whatever the scenario says.
type invariants struct {
	h             *Handler
	started       map[int64]bool
	finished      map[int64]bool // completed or aborted
	lastStarted   int64
	lastCompleted int64
}

func newInvariants(h *Handler) *invariants {
	return &invariants{h: h, started: map[int64]bool{}, finished: map[int64]bool{}}
}

// check returns what is wrong after an event that returned d and err, or "".
func (v *invariants) check(d Decision, err error) string {
	h := v.h
	if err != nil && d != (Decision{}) {
		return fmt.Sprintf("an error came with a decision: %+v", d)
	}
	// Decision: every checkpoint ends once, starts in order, completes in
	// order, and an aligned snapshot is the end of its alignment.
	aborted := d.AbortedIDs()
	if !slices.IsSorted(aborted) || len(slices.Compact(slices.Clone(aborted))) != len(aborted) || slices.Contains(aborted, 0) {
		return fmt.Sprintf("aborted %v: not distinct and in order", aborted)
	}
	if (len(aborted) > 0) != (d.AbortReason != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_UNSPECIFIED) {
		return fmt.Sprintf("aborted %v with reason %v", aborted, d.AbortReason)
	}
	if d.Started != 0 {
		if d.Started <= v.lastStarted || v.finished[d.Started] {
			return fmt.Sprintf("started %d after %d (or after it ended)", d.Started, v.lastStarted)
		}
		v.started[d.Started], v.lastStarted = true, d.Started
	}
	for _, id := range aborted {
		if v.finished[id] || id == d.Completed {
			return fmt.Sprintf("checkpoint %d aborted after it ended, or while completing", id)
		}
		v.finished[id] = true
	}
	if d.Completed != 0 {
		if !v.started[d.Completed] || v.finished[d.Completed] || d.Completed <= v.lastCompleted {
			return fmt.Sprintf("completed %d: not started, ended already, or not after %d", d.Completed, v.lastCompleted)
		}
		v.finished[d.Completed], v.lastCompleted = true, d.Completed
	}
	if d.Snapshot != nil && !d.Unaligned && d.Snapshot.GetCheckpointId() != d.Completed {
		return fmt.Sprintf("aligned snapshot %d without completing it", d.Snapshot.GetCheckpointId())
	}
	// State: what is in progress is exactly what started and did not end,
	// oldest first, within the cap; at-least-once holds nothing back.
	inProgress := h.InProgress()
	var want []int64
	for id := range v.started {
		if !v.finished[id] {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	if !slices.Equal(inProgress, want) {
		return fmt.Sprintf("in progress %v, but started and not ended: %v", inProgress, want)
	}
	if h.current != 0 && len(h.pending) > 0 {
		return fmt.Sprintf("exactly-once %d in progress along with at-least-once %v", h.current, inProgress)
	}
	if len(h.pending) > h.maxPending {
		return fmt.Sprintf("%d at-least-once checkpoints tracked, cap %d", len(h.pending), h.maxPending)
	}
	for _, p := range h.pending {
		if h.complete(p.arrived) {
			return fmt.Sprintf("checkpoint %d has all its barriers but is still in progress", p.id())
		}
		if p.id() > h.latest {
			return fmt.Sprintf("checkpoint %d in progress is newer than the newest seen, %d", p.id(), h.latest)
		}
	}
	for ch := range h.open {
		if h.Blocked(ch) && (h.current == 0 || h.curMode == ModeAtLeastOnce || h.unaligned) {
			return fmt.Sprintf("channel %d blocked without an aligned checkpoint in progress", ch)
		}
	}
	return ""
}
