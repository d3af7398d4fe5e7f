package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// now is swapped by tests to make relative times reproducible.
var now = time.Now

// nextSummary is one line: the state, when it is due, and why.
func nextSummary(n *weirv1.NextCheckpoint) string {
	v := newNextCheckpointView(n)
	if v == nil {
		return "-"
	}
	s := strings.ToLower(strings.ReplaceAll(v.State, "_", " "))
	if v.DueTimestamp > 0 {
		s += " for " + formatTime(v.DueTimestamp)
	}
	return s + ": " + v.Message
}

func writeJobTable(w io.Writer, jobs []*weirv1.JobInfo) error {
	t := newTable(w)
	t.row("ID", "NAME", "STATE", "START", "DURATION", "RESTARTS")
	for _, j := range jobs {
		t.row(j.GetId(), j.GetName(), j.GetState().FlinkName(), formatTime(j.GetStartTimeMs()),
			jobDuration(j), j.GetRestarts())
	}
	return t.flush()
}

func writeJobDetails(w io.Writer, j *weirv1.JobInfo) error {
	t := newTable(w)
	t.row("ID:", j.GetId())
	t.row("Name:", j.GetName())
	t.row("State:", j.GetState().FlinkName())
	t.row("Start:", formatTime(j.GetStartTimeMs()))
	t.row("End:", formatTime(j.GetEndTimeMs()))
	t.row("Duration:", jobDuration(j))
	t.row("Restarts:", j.GetRestarts())
	if r := j.GetRestartingRegions(); len(r) > 0 {
		t.row("Restarting:", fmt.Sprintf("regions %v of %d", r, j.GetRegions()))
	}
	if c := j.GetFailureCause(); c != "" {
		t.row("Failure:", oneLine(c))
	}
	if e := j.GetAutoscaler(); e != nil {
		t.row("Autoscaler:", autoscalerLine(e))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(j.GetVertices()) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	t = newTable(w)
	t.row("VERTEX", "OPERATOR", "PARALLELISM", "SUBTASK", "ATTEMPT", "STATE", "TASKMANAGER", "REGION")
	for _, v := range j.GetVertices() {
		if len(v.GetSubtasks()) == 0 {
			t.row(v.GetName(), v.GetOperator(), v.GetParallelism(), "-", "-", "-", "-", "-")
		}
		for _, s := range v.GetSubtasks() {
			t.row(v.GetName(), v.GetOperator(), v.GetParallelism(), s.GetIndex(), s.GetAttempt(),
				s.GetState().FlinkName(), dash(s.GetTaskmanagerId()), s.GetRegion())
		}
	}
	return t.flush()
}

// autoscalerLine is one decision: when, what, why.
func autoscalerLine(e *weirv1.AutoscalerEntry) string {
	when := formatTime(e.GetTimeMs())
	if e.GetRepeats() > 0 {
		when += fmt.Sprintf(" (%d times to %s)", e.GetRepeats()+1, formatTime(e.GetLastMs()))
	}
	return fmt.Sprintf("%s %s: %s", when, e.GetKind(), oneLine(e.GetReason()))
}

func writeAutoscaler(w io.Writer, r *weirv1.GetAutoscalerResponse) error {
	if !r.GetEnabled() {
		_, err := fmt.Fprintln(w, "The autoscaler is off for this job (job spec autoscaler.enabled).")
		return err
	}
	t := newTable(w)
	t.row("TIME", "LAST", "TIMES", "DECISION", "REASON")
	for _, e := range r.GetHistory() {
		last := "-"
		if e.GetRepeats() > 0 {
			last = formatTime(e.GetLastMs())
		}
		t.row(formatTime(e.GetTimeMs()), last, e.GetRepeats()+1, e.GetKind(), oneLine(e.GetReason()))
	}
	return t.flush()
}

func writeCheckpointList(w io.Writer, r *weirv1.ListCheckpointsResponse) error {
	c := r.GetCounts()
	t := newTable(w)
	t.row("Counts:", fmt.Sprintf("%d total, %d in progress, %d completed, %d failed, %d restored",
		c.GetTotal(), c.GetInProgress(), c.GetCompleted(), c.GetFailed(), c.GetRestored()))
	t.row("Latest completed:", latestSummary(r.GetLatestCompleted()))
	t.row("Latest savepoint:", latestSummary(r.GetLatestSavepoint()))
	t.row("Latest failed:", latestSummary(r.GetLatestFailed()))
	restored := "-"
	if rs := r.GetLatestRestored(); rs != nil {
		kind := "checkpoint"
		if rs.GetIsSavepoint() {
			kind = "savepoint"
		}
		restored = fmt.Sprintf("%d (%s, %s) at %s", rs.GetId(), kind, dash(rs.GetExternalPath()), formatTime(rs.GetRestoreTimestampMs()))
	}
	t.row("Latest restored:", restored)
	t.row("Next checkpoint:", nextSummary(r.GetNextCheckpoint()))
	if err := t.flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	t = newTable(w)
	t.row("ID", "TYPE", "STATUS", "TRIGGERED", "DURATION", "ACKED", "STATE SIZE", "CHECKPOINTED", "PATH")
	for _, h := range r.GetHistory() {
		t.row(h.GetId(), checkpointKind(h), h.GetStatus().FlinkName(), formatTime(h.GetTriggerTimestampMs()),
			checkpointDuration(h), fmt.Sprintf("%d/%d", h.GetNumAcknowledgedSubtasks(), h.GetNumSubtasks()),
			formatBytes(h.GetStateSize()), formatBytes(h.GetCheckpointedSize()), dash(h.GetExternalPath()))
	}
	return t.flush()
}

func latestSummary(c *weirv1.CheckpointStats) string {
	if c == nil {
		return "-"
	}
	s := fmt.Sprintf("%d at %s", c.GetId(), formatTime(c.GetTriggerTimestampMs()))
	if c.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED {
		return s + ": " + oneLine(dash(failureMessage(c)))
	}
	return fmt.Sprintf("%s, %s, %s", s, formatBytes(c.GetStateSize()), dash(c.GetExternalPath()))
}

// checkpointDuration shows "-" rather than a misleading 0s for checkpoints
// that never finished.
func checkpointDuration(c *weirv1.CheckpointStats) string {
	if c.GetEndToEndDurationMs() == 0 && c.GetStatus() != weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED {
		return "-"
	}
	return formatMillis(c.GetEndToEndDurationMs())
}

func checkpointKind(c *weirv1.CheckpointStats) string {
	if c.GetIsSavepoint() {
		return "savepoint"
	}
	return "checkpoint"
}

func writeCheckpointDetails(w io.Writer, r *weirv1.GetCheckpointResponse) error {
	c := r.GetCheckpoint()
	t := newTable(w)
	t.row("ID:", c.GetId())
	t.row("Type:", checkpointKind(c))
	t.row("Status:", c.GetStatus().FlinkName())
	t.row("Triggered:", formatTime(c.GetTriggerTimestampMs()))
	t.row("Latest ack:", formatTime(c.GetLatestAckTimestampMs()))
	t.row("Duration:", checkpointDuration(c))
	t.row("Acknowledged:", fmt.Sprintf("%d/%d subtasks", c.GetNumAcknowledgedSubtasks(), c.GetNumSubtasks()))
	t.row("State size:", formatBytes(c.GetStateSize()))
	t.row("Checkpointed:", formatBytes(c.GetCheckpointedSize()))
	t.row("Path:", dash(c.GetExternalPath()))
	if c.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED {
		t.row("Failure:", oneLine(dash(failureMessage(c))))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(r.GetSubtasks()) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	t = newTable(w)
	t.row("VERTEX", "SUBTASK", "ACKED", "DURATION", "STATE SIZE", "SYNC", "ASYNC", "ALIGNMENT", "START DELAY", "UNALIGNED")
	for _, s := range r.GetSubtasks() {
		m := s.GetMetrics()
		acked := "no"
		if s.GetAcknowledged() {
			acked = "yes"
		}
		t.row(s.GetVertex(), s.GetSubtaskIndex(), acked, formatMillis(s.GetEndToEndDurationMs()), formatBytes(s.GetStateSize()),
			formatMillis(m.GetSyncDurationMs()), formatMillis(m.GetAsyncDurationMs()), formatMillis(m.GetAlignmentDurationMs()),
			formatMillis(m.GetStartDelayMs()), m.GetUnaligned())
	}
	return t.flush()
}

func writeTaskManagerTable(w io.Writer, tms []*weirv1.TaskManagerInfo) error {
	t := newTable(w)
	t.row("ID", "ADDRESS", "HTTP", "SLOTS", "FREE", "LAST HEARTBEAT")
	for _, tm := range tms {
		t.row(tm.GetId(), tm.GetAddress(), dash(tm.GetHttpAddress()), tm.GetSlots(), tm.GetFreeSlots(), ago(tm.GetLastHeartbeatMs()))
	}
	return t.flush()
}

// jobDuration is how long a job ran, or has been running so far.
func jobDuration(j *weirv1.JobInfo) string {
	start, end := j.GetStartTimeMs(), j.GetEndTimeMs()
	if start <= 0 {
		return "-"
	}
	if end <= 0 {
		end = now().UnixMilli()
	}
	return formatMillis(end - start)
}

func formatTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}

func ago(ms int64) string {
	if ms <= 0 {
		return "never"
	}
	return formatMillis(now().UnixMilli()-ms) + " ago"
}

// formatMillis keeps the precision that matters at each scale: "850ms",
// "2.5s", "1m5s", "2h3m".
func formatMillis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a multi-line cause (a stack trace) from breaking the table.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func writeExceptions(w io.Writer, views []exceptionView) error {
	if len(views) == 0 {
		_, err := fmt.Fprintln(w, "No exceptions.")
		return err
	}
	t := newTable(w)
	t.row("TIME", "TASK", "TASKMANAGER", "RESTARTED", "CAUSE")
	for _, v := range views {
		restarted := "-"
		switch {
		case v.FullRestart:
			restarted = "all"
		case len(v.Regions) > 0:
			restarted = fmt.Sprintf("regions %v", v.Regions)
		}
		t.row(formatTime(v.Timestamp), dash(v.Task), dash(v.TaskManagerID), restarted, oneLine(v.Cause))
	}
	return t.flush()
}
