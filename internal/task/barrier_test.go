package task

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestBarrierHandler runs the scenarios in testdata/barrier. Commands:
//
//	new channels=<n> mode=exactly-once|at-least-once
//	barrier ch=<i> id=<checkpoint> [ts=<ms>]
//	cancel ch=<i> id=<checkpoint>
//	eop ch=<i>
//	state
//
// Every event prints the Decision (or the error) followed by the handler's
// state: the checkpoint being aligned and the blocked channels.
func TestBarrierHandler(t *testing.T) {
	datadriven.Walk(t, "testdata/barrier", func(t *testing.T, path string) {
		var (
			h *BarrierHandler
			n int
		)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && h == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			var (
				dec Decision
				err error
			)
			switch d.Cmd {
			case "new":
				var mode string
				d.ScanArgs(t, "channels", &n)
				d.ScanArgs(t, "mode", &mode)
				switch mode {
				case "exactly-once":
					h = NewBarrierHandler(n, true)
				case "at-least-once":
					h = NewBarrierHandler(n, false)
				default:
					d.Fatalf(t, "unknown mode %q", mode)
				}
				return formatState(h, n)
			case "barrier":
				var ch int
				var id, ts int64
				d.ScanArgs(t, "ch", &ch)
				d.ScanArgs(t, "id", &id)
				if d.HasArg("ts") {
					d.ScanArgs(t, "ts", &ts)
				}
				dec, err = h.OnBarrier(ch, &weirv1.CheckpointBarrier{CheckpointId: id, TimestampMs: ts})
			case "cancel":
				var ch int
				var id int64
				d.ScanArgs(t, "ch", &ch)
				d.ScanArgs(t, "id", &id)
				dec, err = h.OnCancelMarker(ch, id)
			case "eop":
				var ch int
				d.ScanArgs(t, "ch", &ch)
				dec, err = h.OnEndOfPartition(ch)
			case "state":
				return formatState(h, n)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			var b strings.Builder
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
			} else {
				b.WriteString(formatDecision(dec))
			}
			b.WriteString(formatState(h, n))
			return b.String()
		})
	})
}

func formatDecision(d Decision) string {
	var parts []string
	if d.Aborted != 0 {
		parts = append(parts, fmt.Sprintf("aborted=%d reason=%s", d.Aborted,
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
	if d.Snapshot != nil {
		s := fmt.Sprintf("snapshot=%d", d.Snapshot.GetCheckpointId())
		if ts := d.Snapshot.GetTimestampMs(); ts != 0 {
			s += fmt.Sprintf("@%d", ts)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "decision: none\n"
	}
	return "decision: " + strings.Join(parts, " ") + "\n"
}

func formatState(h *BarrierHandler, n int) string {
	var blocked []string
	for ch := range n {
		if h.Blocked(ch) {
			blocked = append(blocked, fmt.Sprint(ch))
		}
	}
	b := "none"
	if len(blocked) > 0 {
		b = strings.Join(blocked, ",")
	}
	a := "none"
	if id := h.Aligning(); id != 0 {
		a = fmt.Sprint(id)
	}
	return fmt.Sprintf("aligning: %s blocked: %s\n", a, b)
}
