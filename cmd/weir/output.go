package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

type format int

const (
	formatTable format = iota
	formatJSON
)

func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "table", "output format: table or json")
}

func parseFormat(s string) (format, error) {
	switch s {
	case "table":
		return formatTable, nil
	case "json":
		return formatJSON, nil
	}
	return 0, usageErrorf("invalid output format %q (want table or json)", s)
}

// now is swapped by tests to make relative times reproducible.
var now = time.Now

// The *View types fix the JSON field names, which are a contract with
// scripts: they follow Flink's REST API so existing tooling carries over.

type jobView struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	State        string `json:"state"`
	StartTime    int64  `json:"start_time"`
	EndTime      int64  `json:"end_time"`
	FailureCause string `json:"failure_cause"`
	Restarts     int32  `json:"restarts"`
	// Regions counts the job's pipelined regions; RestartingRegions are
	// being restarted now.
	Regions           int32        `json:"regions"`
	RestartingRegions []int32      `json:"restarting_regions"`
	Vertices          []vertexView `json:"vertices"`
}

type vertexView struct {
	Name        string        `json:"name"`
	Operator    string        `json:"operator"`
	Parallelism int32         `json:"parallelism"`
	Subtasks    []subtaskView `json:"subtasks"`
}

type subtaskView struct {
	Index         int32  `json:"index"`
	Attempt       int32  `json:"attempt"`
	State         string `json:"state"`
	TaskManagerID string `json:"taskmanager_id"`
	FailureCause  string `json:"failure_cause,omitempty"`
	Region        int32  `json:"region"`
}

func newJobView(j *weirv1.JobInfo) jobView {
	v := jobView{
		ID:                j.GetId(),
		Name:              j.GetName(),
		State:             j.GetState().FlinkName(),
		StartTime:         j.GetStartTimeMs(),
		EndTime:           j.GetEndTimeMs(),
		FailureCause:      j.GetFailureCause(),
		Restarts:          j.GetRestarts(),
		Regions:           j.GetRegions(),
		Vertices:          []vertexView{},
		RestartingRegions: append([]int32{}, j.GetRestartingRegions()...),
	}
	for _, vx := range j.GetVertices() {
		vv := vertexView{Name: vx.GetName(), Operator: vx.GetOperator(), Parallelism: vx.GetParallelism(), Subtasks: []subtaskView{}}
		for _, st := range vx.GetSubtasks() {
			vv.Subtasks = append(vv.Subtasks, subtaskView{
				Index:         st.GetIndex(),
				Attempt:       st.GetAttempt(),
				State:         st.GetState().FlinkName(),
				TaskManagerID: st.GetTaskmanagerId(),
				FailureCause:  st.GetFailureCause(),
				Region:        st.GetRegion(),
			})
		}
		v.Vertices = append(v.Vertices, vv)
	}
	return v
}

type checkpointView struct {
	ID                      int64  `json:"id"`
	Status                  string `json:"status"`
	IsSavepoint             bool   `json:"is_savepoint"`
	TriggerTimestamp        int64  `json:"trigger_timestamp"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	StateSize               int64  `json:"state_size"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	NumSubtasks             int32  `json:"num_subtasks"`
	NumAcknowledgedSubtasks int32  `json:"num_acknowledged_subtasks"`
	ExternalPath            string `json:"external_path"`
	// Pointers so the keys appear for failed checkpoints only, as in Flink.
	FailureMessage   *string `json:"failure_message,omitempty"`
	FailureTimestamp *int64  `json:"failure_timestamp,omitempty"`
}

func newCheckpointView(c *weirv1.CheckpointStats) *checkpointView {
	if c == nil {
		return nil
	}
	v := &checkpointView{
		ID:                      c.GetId(),
		Status:                  c.GetStatus().FlinkName(),
		IsSavepoint:             c.GetIsSavepoint(),
		TriggerTimestamp:        c.GetTriggerTimestampMs(),
		LatestAckTimestamp:      c.GetLatestAckTimestampMs(),
		EndToEndDuration:        c.GetEndToEndDurationMs(),
		StateSize:               c.GetStateSize(),
		CheckpointedSize:        c.GetCheckpointedSize(),
		NumSubtasks:             c.GetNumSubtasks(),
		NumAcknowledgedSubtasks: c.GetNumAcknowledgedSubtasks(),
		ExternalPath:            c.GetExternalPath(),
	}
	if c.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED {
		msg, ts := failureMessage(c), c.GetFailureTimestampMs()
		v.FailureMessage, v.FailureTimestamp = &msg, &ts
	}
	return v
}

// failureMessage falls back to the reason code when the JobManager sent no
// text, so a failed checkpoint never shows an empty cause.
func failureMessage(c *weirv1.CheckpointStats) string {
	if m := c.GetFailureMessage(); m != "" {
		return m
	}
	return c.GetFailureReason().FlinkName()
}

type checkpointCountsView struct {
	Restored   int64 `json:"restored"`
	Total      int64 `json:"total"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

type restoredView struct {
	ID               int64  `json:"id"`
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

type latestView struct {
	Completed *checkpointView `json:"completed"`
	Savepoint *checkpointView `json:"savepoint"`
	Failed    *checkpointView `json:"failed"`
	Restored  *restoredView   `json:"restored"`
}

// checkpointListView is the shape of Flink's GET /jobs/:id/checkpoints.
type checkpointListView struct {
	Counts  checkpointCountsView `json:"counts"`
	History []*checkpointView    `json:"history"`
	Latest  latestView           `json:"latest"`
	// NextCheckpoint is the REST API's next_checkpoint (a Weir addition).
	NextCheckpoint *nextCheckpointView `json:"next_checkpoint,omitempty"`
}

type nextCheckpointView struct {
	State        string `json:"state"`
	Reason       string `json:"reason"`
	Message      string `json:"message"`
	DueTimestamp int64  `json:"due_timestamp"`
	Queued       int32  `json:"queued"`
}

func newNextCheckpointView(n *weirv1.NextCheckpoint) *nextCheckpointView {
	if n == nil {
		return nil
	}
	return &nextCheckpointView{
		State:        n.GetState().Name(),
		Reason:       n.GetReason().Name(),
		Message:      n.GetMessage(),
		DueTimestamp: n.GetDueTimestampMs(),
		Queued:       n.GetQueued(),
	}
}

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

func newCheckpointListView(r *weirv1.ListCheckpointsResponse) checkpointListView {
	c := r.GetCounts()
	v := checkpointListView{
		Counts: checkpointCountsView{
			Restored:   c.GetRestored(),
			Total:      c.GetTotal(),
			InProgress: c.GetInProgress(),
			Completed:  c.GetCompleted(),
			Failed:     c.GetFailed(),
		},
		History: []*checkpointView{},
		Latest: latestView{
			Completed: newCheckpointView(r.GetLatestCompleted()),
			Savepoint: newCheckpointView(r.GetLatestSavepoint()),
			Failed:    newCheckpointView(r.GetLatestFailed()),
		},
		NextCheckpoint: newNextCheckpointView(r.GetNextCheckpoint()),
	}
	for _, h := range r.GetHistory() {
		if cv := newCheckpointView(h); cv != nil {
			v.History = append(v.History, cv)
		}
	}
	if rs := r.GetLatestRestored(); rs != nil {
		v.Latest.Restored = &restoredView{
			ID:               rs.GetId(),
			RestoreTimestamp: rs.GetRestoreTimestampMs(),
			IsSavepoint:      rs.GetIsSavepoint(),
			ExternalPath:     rs.GetExternalPath(),
		}
	}
	return v
}

// subtaskCheckpointView follows Flink's per-subtask checkpoint details.
type subtaskCheckpointView struct {
	Vertex           string `json:"vertex"`
	Index            int32  `json:"index"`
	Status           string `json:"status"`
	AckTimestamp     int64  `json:"ack_timestamp"`
	EndToEndDuration int64  `json:"end_to_end_duration"`
	StateSize        int64  `json:"state_size"`
	CheckpointedSize int64  `json:"checkpointed_size"`
	Checkpoint       struct {
		Sync  int64 `json:"sync"`
		Async int64 `json:"async"`
	} `json:"checkpoint"`
	Alignment struct {
		Buffered  int64 `json:"buffered"`
		Persisted int64 `json:"persisted"`
		Duration  int64 `json:"duration"`
	} `json:"alignment"`
	StartDelay          int64 `json:"start_delay"`
	UnalignedCheckpoint bool  `json:"unaligned_checkpoint"`
}

type checkpointDetailView struct {
	*checkpointView
	Subtasks []subtaskCheckpointView `json:"subtasks"`
}

func newCheckpointDetailView(r *weirv1.GetCheckpointResponse) checkpointDetailView {
	cv := newCheckpointView(r.GetCheckpoint())
	if cv == nil {
		cv = &checkpointView{}
	}
	v := checkpointDetailView{checkpointView: cv, Subtasks: []subtaskCheckpointView{}}
	for _, s := range r.GetSubtasks() {
		sv := subtaskCheckpointView{
			Vertex:           s.GetVertex(),
			Index:            s.GetSubtaskIndex(),
			Status:           "pending_or_failed",
			AckTimestamp:     s.GetAckTimestampMs(),
			EndToEndDuration: s.GetEndToEndDurationMs(),
			StateSize:        s.GetStateSize(),
			CheckpointedSize: s.GetCheckpointedSize(),
		}
		if s.GetAcknowledged() {
			sv.Status = "completed"
		}
		m := s.GetMetrics()
		sv.Checkpoint.Sync = m.GetSyncDurationMs()
		sv.Checkpoint.Async = m.GetAsyncDurationMs()
		sv.Alignment.Buffered = m.GetBytesBufferedDuringAlignment()
		sv.Alignment.Persisted = m.GetBytesPersistedDuringAlignment()
		sv.Alignment.Duration = m.GetAlignmentDurationMs()
		sv.StartDelay = m.GetStartDelayMs()
		sv.UnalignedCheckpoint = m.GetUnaligned()
		v.Subtasks = append(v.Subtasks, sv)
	}
	return v
}

type taskManagerView struct {
	ID            string `json:"id"`
	Address       string `json:"address"`
	HTTPAddress   string `json:"http_address"`
	Slots         int32  `json:"slots"`
	FreeSlots     int32  `json:"free_slots"`
	LastHeartbeat int64  `json:"last_heartbeat"`
}

func newTaskManagerView(tm *weirv1.TaskManagerInfo) taskManagerView {
	return taskManagerView{
		ID:            tm.GetId(),
		Address:       tm.GetAddress(),
		HTTPAddress:   tm.GetHttpAddress(),
		Slots:         tm.GetSlots(),
		FreeSlots:     tm.GetFreeSlots(),
		LastHeartbeat: tm.GetLastHeartbeatMs(),
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// writeTriggered prints ID and path tab-separated, which both reads well
// and splits with `read id path` or cut.
func writeTriggered(w io.Writer, id int64, path string) error {
	_, err := fmt.Fprintf(w, "%d\t%s\n", id, path)
	return err
}

// table accumulates rows for text/tabwriter and remembers the first write
// error so that rendering code stays linear.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

func (t *table) row(cells ...any) {
	if t.err != nil {
		return
	}
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	_, t.err = fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() error {
	if t.err != nil {
		return fmt.Errorf("write table: %w", t.err)
	}
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
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

type exceptionView struct {
	Timestamp     int64   `json:"timestamp"`
	Task          string  `json:"task"`
	TaskManagerID string  `json:"taskmanager_id"`
	Cause         string  `json:"cause"`
	Regions       []int32 `json:"regions"`
	FullRestart   bool    `json:"full_restart"`
}

// newExceptionViews lists a job's failures newest first, as Flink's
// exception history does.
func newExceptionViews(j *weirv1.JobInfo) []exceptionView {
	ex := j.GetExceptions()
	out := make([]exceptionView, 0, len(ex))
	for i := len(ex) - 1; i >= 0; i-- {
		e := ex[i]
		out = append(out, exceptionView{
			Timestamp: e.GetTimestampMs(), Task: e.GetTask(), TaskManagerID: e.GetTaskmanagerId(), Cause: e.GetCause(),
			Regions: append([]int32{}, e.GetRegions()...), FullRestart: e.GetFullRestart(),
		})
	}
	return out
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
