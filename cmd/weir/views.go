package main

import weirv1 "github.com/weirproject/weir/proto/weir/v1"

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
	// Autoscaler is the autoscaler's latest decision; absent when it is
	// off or has not decided yet.
	Autoscaler *autoscalerEntryView `json:"autoscaler,omitempty"`
}

type autoscalerEntryView struct {
	Time        int64                      `json:"time"`
	Last        int64                      `json:"last,omitempty"`
	Repeats     int32                      `json:"repeats,omitempty"`
	Kind        string                     `json:"kind"`
	Reason      string                     `json:"reason"`
	Parallelism map[string]int32           `json:"parallelism,omitempty"`
	Vertices    []autoscalerEvaluationView `json:"vertices,omitempty"`
}

type autoscalerEvaluationView struct {
	Vertex              string  `json:"vertex"`
	Parallelism         int32   `json:"parallelism"`
	BusyMsPerSecond     float64 `json:"busy_ms_per_second"`
	RecordsInPerSecond  float64 `json:"records_in_per_second"`
	RecordsOutPerSecond float64 `json:"records_out_per_second"`
	TrueProcessingRate  float64 `json:"true_processing_rate"`
	TargetRate          float64 `json:"target_rate"`
	CatchUpRate         float64 `json:"catch_up_rate"`
	PendingRecords      int64   `json:"pending_records"`
	Utilization         float64 `json:"utilization"`
	WithinTarget        bool    `json:"within_target"`
	Recommended         int32   `json:"recommended"`
	Chosen              int32   `json:"chosen"`
	Reason              string  `json:"reason"`
}

// autoscalerView is weir job autoscaler -o json.
type autoscalerView struct {
	Enabled bool                     `json:"enabled"`
	Config  *weirv1.AutoscalerConfig `json:"config"`
	History []autoscalerEntryView    `json:"history"`
}

func newAutoscalerView(r *weirv1.GetAutoscalerResponse) autoscalerView {
	v := autoscalerView{Enabled: r.GetEnabled(), Config: r.GetConfig(), History: []autoscalerEntryView{}}
	for _, e := range r.GetHistory() {
		v.History = append(v.History, *newAutoscalerEntryView(e))
	}
	return v
}

func newAutoscalerEntryView(e *weirv1.AutoscalerEntry) *autoscalerEntryView {
	if e == nil {
		return nil
	}
	v := &autoscalerEntryView{Time: e.GetTimeMs(), Last: e.GetLastMs(), Repeats: e.GetRepeats(), Kind: e.GetKind(), Reason: e.GetReason(), Parallelism: e.GetParallelism()}
	for _, x := range e.GetEvaluations() {
		v.Vertices = append(v.Vertices, autoscalerEvaluationView{
			Vertex: x.GetVertex(), Parallelism: x.GetParallelism(), BusyMsPerSecond: x.GetBusyMsPerSecond(),
			RecordsInPerSecond: x.GetRecordsInPerSecond(), RecordsOutPerSecond: x.GetRecordsOutPerSecond(),
			TrueProcessingRate: x.GetTrueProcessingRate(), TargetRate: x.GetTargetRate(), CatchUpRate: x.GetCatchUpRate(),
			PendingRecords: x.GetPendingRecords(), Utilization: x.GetUtilization(), WithinTarget: x.GetWithinTarget(),
			Recommended: x.GetRecommended(), Chosen: x.GetChosen(), Reason: x.GetReason(),
		})
	}
	return v
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
		Autoscaler:        newAutoscalerEntryView(j.GetAutoscaler()),
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
