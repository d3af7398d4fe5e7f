package restapi

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// VertexID is the 32-hex ID the REST API uses for a vertex, in place of
// Flink's JobVertexID: the first 16 bytes of sha256(jobID + "/" + name).
// It is stable for the life of a job and differs between jobs.
func VertexID(jobID, vertexName string) string {
	sum := sha256.Sum256([]byte(jobID + "/" + vertexName))
	return hex.EncodeToString(sum[:16])
}

// Flink's JobStatus and ExecutionState names, in Flink's enum order.
var (
	jobStatusNames = []string{
		"INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING",
		"CANCELED", "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING",
	}
	executionStateNames = []string{
		"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING",
		"CANCELED", "FAILED", "RECONCILING", "INITIALIZING",
	}
)

func terminalJobState(s weirv1.JobState) bool {
	switch s {
	case weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FAILED:
		return true
	}
	return false
}

func shipStrategy(p weirv1.Partitioner) string {
	switch p {
	case weirv1.Partitioner_PARTITIONER_FORWARD:
		return "FORWARD"
	case weirv1.Partitioner_PARTITIONER_HASH:
		return "HASH"
	case weirv1.Partitioner_PARTITIONER_REBALANCE:
		return "REBALANCE"
	case weirv1.Partitioner_PARTITIONER_BROADCAST:
		return "BROADCAST"
	}
	return "UNKNOWN"
}

// msOrMinusOne maps an unset (0) epoch-millisecond time to Flink's -1.
func msOrMinusOne(ms int64) int64 {
	if ms <= 0 {
		return -1
	}
	return ms
}

// pointer is Flink's external pointer of a checkpoint or savepoint: its
// directory. The core reports the _metadata file inside it; Weir restores
// from either.
func pointer(path string) string {
	if d, f := filepath.Split(path); f == storage.MetadataFile && d != "" {
		return filepath.Clean(d)
	}
	return path
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// jobView is a job's vertices with their REST IDs.
type jobView struct {
	info     *weirv1.JobInfo
	vertices []vertexView
}

type vertexView struct {
	id, name    string
	parallelism int32
	info        *weirv1.VertexInfo
}

func newJobView(info *weirv1.JobInfo) *jobView {
	j := &jobView{info: info}
	for _, v := range info.GetVertices() {
		j.vertices = append(j.vertices, vertexView{
			id: VertexID(info.GetId(), v.GetName()), name: v.GetName(), parallelism: v.GetParallelism(), info: v,
		})
	}
	return j
}

// vertex finds a vertex by REST ID or by name.
func (j *jobView) vertex(idOrName string) (vertexView, bool) {
	for _, v := range j.vertices {
		if v.id == strings.ToLower(idOrName) || v.name == idOrName {
			return v, true
		}
	}
	return vertexView{}, false
}

// vertexList names the job's vertices for error messages: "id (name), ...".
func (j *jobView) vertexList() string {
	known := make([]string, 0, len(j.vertices))
	for _, v := range j.vertices {
		known = append(known, fmt.Sprintf("%s (%s)", v.id, v.name))
	}
	return strings.Join(known, ", ")
}

// ---------------------------------------------------------------------------
// Jobs

func taskCounts(subtasks []*weirv1.SubtaskInfo) map[string]int {
	m := make(map[string]int, len(executionStateNames))
	for _, n := range executionStateNames {
		m[n] = 0
	}
	for _, st := range subtasks {
		m[st.GetState().FlinkName()]++
	}
	return m
}

func allSubtasks(info *weirv1.JobInfo) []*weirv1.SubtaskInfo {
	var out []*weirv1.SubtaskInfo
	for _, v := range info.GetVertices() {
		out = append(out, v.GetSubtasks()...)
	}
	return out
}

// jobTimes gives Flink's start-time, end-time and duration of a job.
func jobTimes(info *weirv1.JobInfo, now int64) (start, end, duration int64) {
	start, end = msOrMinusOne(info.GetStartTimeMs()), msOrMinusOne(info.GetEndTimeMs())
	switch {
	case start < 0:
		duration = -1
	case end >= 0:
		duration = end - start
	default:
		duration = now - start
	}
	return start, end, duration
}

func toJobDetails(info *weirv1.JobInfo, now int64) jobDetails {
	start, end, duration := jobTimes(info, now)
	tasks := map[string]int{}
	subtasks := allSubtasks(info)
	for n, c := range taskCounts(subtasks) {
		tasks[strings.ToLower(n)] = c
	}
	tasks["total"] = len(subtasks)
	return jobDetails{
		JID: info.GetId(), Name: info.GetName(), StartTime: start, EndTime: end, Duration: duration,
		LastModification: max(info.GetStartTimeMs(), info.GetEndTimeMs()),
		State:            info.GetState().FlinkName(), Tasks: tasks,
	}
}

// vertexState aggregates the subtasks' states like Flink's
// ExecutionJobVertex.getAggregateJobVertexState.
func vertexState(counts map[string]int, parallelism int) string {
	switch {
	case parallelism > 0 && counts["FINISHED"] == parallelism:
		return "FINISHED"
	case counts["FAILED"] > 0:
		return "FAILED"
	case counts["CANCELING"] > 0:
		return "CANCELING"
	case counts["CANCELED"] > 0:
		return "CANCELED"
	case counts["INITIALIZING"] > 0:
		return "INITIALIZING"
	case counts["RUNNING"] > 0 || counts["FINISHED"] > 0:
		return "RUNNING"
	case counts["DEPLOYING"] > 0:
		return "DEPLOYING"
	case counts["SCHEDULED"] > 0:
		return "SCHEDULED"
	}
	return "CREATED"
}

func toJobDetailsInfo(info *weirv1.JobInfo, now int64) jobDetailsInfo {
	start, end, duration := jobTimes(info, now)
	view := newJobView(info)
	ts := make(map[string]int64, len(jobStatusNames))
	for _, n := range jobStatusNames {
		ts[n] = 0
	}
	if info.GetStartTimeMs() > 0 {
		ts["RUNNING"] = info.GetStartTimeMs()
	}
	if info.GetEndTimeMs() > 0 && terminalJobState(info.GetState()) {
		ts[info.GetState().FlinkName()] = info.GetEndTimeMs()
	}
	maxPar := int(info.GetGraph().GetMaxParallelism())
	out := jobDetailsInfo{
		JID: info.GetId(), Name: info.GetName(), State: info.GetState().FlinkName(),
		StartTime: start, EndTime: end, Duration: duration, MaxParallelism: int64(maxPar), Now: now,
		Timestamps: ts, Vertices: []jobVertexDetailInfo{}, StatusCounts: taskCounts(allSubtasks(info)),
		FailureCause: info.GetFailureCause(), Restarts: info.GetRestarts(), SQL: info.GetGraph().GetSql(),
		Plan: toJobPlan(info),
	}
	if out.MaxParallelism == 0 {
		out.MaxParallelism = -1
	}
	for _, v := range view.vertices {
		counts := taskCounts(v.info.GetSubtasks())
		vs := vertexState(counts, int(v.parallelism))
		vStart, vEnd, vDur := int64(-1), int64(-1), int64(-1)
		if vs != "CREATED" {
			// Weir keeps no per-vertex times; the job's are the closest.
			vStart, vEnd, vDur = start, end, duration
			if !(vs == "FINISHED" || vs == "CANCELED" || vs == "FAILED") {
				vEnd = -1
				if vStart >= 0 {
					vDur = now - vStart
				}
			}
		}
		out.Vertices = append(out.Vertices, jobVertexDetailInfo{
			ID: v.id, Name: v.name, MaxParallelism: maxPar, Parallelism: int(v.parallelism), Status: vs,
			StartTime: vStart, EndTime: vEnd, Duration: vDur, Tasks: counts, Metrics: toIOMetrics(v),
		})
	}
	return out
}

// toJobPlan is Flink's JSON plan of the job graph, its nodes under the
// same REST IDs as the job's vertices. A node's description is what the
// vertex runs: the part of the plan of a SQL job's vertex, as in Flink's
// SQL jobs, the vertex's name otherwise.
func toJobPlan(info *weirv1.JobInfo) jobPlan {
	plan := jobPlan{JID: info.GetId(), Name: info.GetName(), Type: "STREAMING", Nodes: []jobPlanNode{}}
	for _, gv := range info.GetGraph().GetVertices() {
		n := jobPlanNode{
			ID: VertexID(info.GetId(), gv.GetName()), Parallelism: int(gv.GetParallelism()),
			Operator: gv.GetOperator(), Description: cmp.Or(gv.GetDescription(), gv.GetName()),
			ChangelogMode: gv.GetChangelogMode(),
		}
		for i, in := range gv.GetInputs() {
			n.Inputs = append(n.Inputs, jobPlanNodeInput{
				Num: i, ID: VertexID(info.GetId(), in.GetSource()), ShipStrategy: shipStrategy(in.GetPartitioner()),
				Exchange: "pipelined_bounded",
			})
		}
		plan.Nodes = append(plan.Nodes, n)
	}
	return plan
}

func toTaskManagerInfo(tm *weirv1.TaskManagerInfo) taskManagerInfo {
	port := -1
	if _, p, err := net.SplitHostPort(tm.GetAddress()); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			port = n
		}
	}
	return taskManagerInfo{
		ID: tm.GetId(), Path: tm.GetAddress(), DataPort: port, JmxPort: -1,
		TimeSinceLastHeartbeat: tm.GetLastHeartbeatMs(), SlotsNumber: tm.GetSlots(), FreeSlots: tm.GetFreeSlots(),
		HTTPAddress: tm.GetHttpAddress(),
	}
}

// ---------------------------------------------------------------------------
// Checkpoint configuration

func toCheckpointConfig(g *weirv1.JobGraph) checkpointConfigInfo {
	cp := g.GetCheckpointing()
	mode := "exactly_once"
	if cp.GetMode() == weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE {
		mode = "at_least_once"
	}
	interval := cp.GetInterval().AsDuration().Milliseconds()
	periodic := interval > 0
	if !periodic {
		interval = math.MaxInt64 // Flink's value for "no periodic checkpoints"
	}
	backend := "heap"
	if g.GetState().GetBackend() == weirv1.StateBackendConfig_BACKEND_PEBBLE {
		backend = "pebble"
	}
	ret := cp.GetExternalizedRetention()
	return checkpointConfigInfo{
		Mode: mode, Interval: interval, Timeout: cp.GetTimeout().AsDuration().Milliseconds(),
		MinPause: cp.GetMinPause().AsDuration().Milliseconds(), MaxConcurrent: int64(cp.GetMaxConcurrent()),
		Externalization: externalizedCheckpointInfo{
			Enabled:              ret != weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_UNSPECIFIED,
			DeleteOnCancellation: ret != weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_RETAIN_ON_CANCELLATION,
		},
		StateBackend: backend, CheckpointStorage: "filesystem",
		UnalignedCheckpoints:        cp.GetUnaligned(),
		TolerableFailedCheckpoints:  cp.GetTolerableFailedCheckpoints(),
		AlignedCheckpointTimeout:    cp.GetAlignedCheckpointTimeout().AsDuration().Milliseconds(),
		CheckpointsAfterTasksFinish: true,
		PeriodicCheckpoints:         periodic,
		RetainedCheckpoints:         cp.GetRetained(),
		Incremental:                 g.GetState().GetIncremental(),
	}
}

// ---------------------------------------------------------------------------
// Checkpoint statistics

// inFlight sums what the acknowledged subtasks measured about in-flight
// data. Weir measures the bytes that queued on blocked inputs during
// alignment (Flink's original alignment_buffered); those bytes are
// processed as part of the alignment, so they are also the processed_data.
// persisted_data is the channel state an unaligned checkpoint wrote.
type inFlight struct {
	known                          bool
	buffered, processed, persisted int64
}

func sumInFlight(subs []*weirv1.SubtaskCheckpointStats) inFlight {
	f := inFlight{known: len(subs) > 0}
	for _, s := range subs {
		if !s.GetAcknowledged() {
			continue
		}
		m := s.GetMetrics()
		f.buffered += m.GetBytesBufferedDuringAlignment()
		f.processed += m.GetBytesBufferedDuringAlignment()
		f.persisted += m.GetBytesPersistedDuringAlignment()
	}
	return f
}

// latestAck is Flink's latest_ack_timestamp: -1 before the first ack.
func latestAck(c *weirv1.CheckpointStats) int64 {
	if c.GetNumAcknowledgedSubtasks() == 0 {
		return -1
	}
	return msOrMinusOne(c.GetLatestAckTimestampMs())
}

// endToEnd is Flink's end_to_end_duration: completion or failure time minus
// trigger time, and for a pending checkpoint the latest ack minus the
// trigger time (-1 before the first ack).
func endToEnd(c *weirv1.CheckpointStats) int64 {
	if c.GetStatus() != weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED &&
		c.GetStatus() != weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED && c.GetNumAcknowledgedSubtasks() == 0 {
		return -1
	}
	return c.GetEndToEndDurationMs()
}

func baseCheckpoint(c *weirv1.CheckpointStats, class string, f inFlight, tasks map[string]taskCheckpointStatistics) checkpointStatistics {
	if tasks == nil {
		tasks = map[string]taskCheckpointStatistics{}
	}
	typ := "CHECKPOINT"
	var format *string
	if c.GetIsSavepoint() {
		// Weir's savepoints are self-contained full snapshots, Flink's
		// canonical format in spirit.
		typ, format = "SAVEPOINT", strPtr("CANONICAL")
	}
	return checkpointStatistics{
		ClassName: class, ID: c.GetId(), Status: c.GetStatus().FlinkName(), IsSavepoint: c.GetIsSavepoint(),
		SavepointFormat: format, TriggerTimestamp: c.GetTriggerTimestampMs(), LatestAckTimestamp: latestAck(c),
		CheckpointedSize: c.GetCheckpointedSize(), StateSize: c.GetStateSize(), EndToEndDuration: endToEnd(c),
		AlignmentBuffered: f.buffered, ProcessedData: f.processed, PersistedData: f.persisted,
		NumSubtasks: c.GetNumSubtasks(), NumAcknowledgedSubtasks: c.GetNumAcknowledgedSubtasks(),
		CheckpointType: typ, Tasks: tasks,
	}
}

func toCompleted(c *weirv1.CheckpointStats, f inFlight, tasks map[string]taskCheckpointStatistics) *completedCheckpointStatistics {
	return &completedCheckpointStatistics{
		checkpointStatistics: baseCheckpoint(c, classCompleted, f, tasks),
		ExternalPath:         strPtr(pointer(c.GetExternalPath())),
		Discarded:            c.GetDiscarded(),
	}
}

func toFailed(c *weirv1.CheckpointStats, f inFlight, tasks map[string]taskCheckpointStatistics, job *jobView, subs []*weirv1.SubtaskCheckpointStats) *failedCheckpointStatistics {
	return &failedCheckpointStatistics{
		checkpointStatistics: baseCheckpoint(c, classFailed, f, tasks),
		FailureTimestamp:     c.GetFailureTimestampMs(),
		FailureMessage:       strPtr(c.GetFailureMessage()),
		FailureReason:        c.GetFailureReason().FlinkName(),
		DeclinedSubtasks:     unacknowledged(job, subs, true),
		PendingSubtasks:      unacknowledged(job, subs, false),
	}
}

func toPending(c *weirv1.CheckpointStats, f inFlight, tasks map[string]taskCheckpointStatistics, job *jobView, subs []*weirv1.SubtaskCheckpointStats) *pendingCheckpointStatistics {
	return &pendingCheckpointStatistics{
		checkpointStatistics: baseCheckpoint(c, classInProgress, f, tasks),
		PendingSubtasks:      unacknowledged(job, subs, false),
	}
}

// unacknowledged lists the subtasks the core reported with
// acknowledged=false that declined (or did not), with how far each got.
func unacknowledged(job *jobView, subs []*weirv1.SubtaskCheckpointStats, declined bool) []subtaskRef {
	var out []subtaskRef
	for _, s := range subs {
		if s.GetAcknowledged() || s.GetDeclined() != declined {
			continue
		}
		ref := subtaskRef{Vertex: s.GetVertex(), Subtask: s.GetSubtaskIndex(), VertexID: VertexID(job.info.GetId(), s.GetVertex()),
			DeclineMessage: s.GetDeclineMessage(), checkpointPhase: phaseOf(s)}
		out = append(out, ref)
	}
	return out
}

// phaseOf says how far a subtask that has not acknowledged got.
func phaseOf(s *weirv1.SubtaskCheckpointStats) checkpointPhase {
	p := checkpointPhase{Phase: "WAITING", PhaseTimestamp: s.GetPhaseReportedMs()}
	if ph := s.GetPhase(); ph != weirv1.CheckpointPhase_CHECKPOINT_PHASE_UNSPECIFIED {
		p.Phase = strings.TrimPrefix(ph.String(), "CHECKPOINT_PHASE_")
	}
	if s.GetChannels() > 0 {
		received, channels := s.GetBarriersReceived(), s.GetChannels()
		p.BarriersReceived, p.Channels = &received, &channels
	}
	return p
}

// toCheckpoint converts one checkpoint to its CheckpointStatistics subtype.
func toCheckpoint(c *weirv1.CheckpointStats, f inFlight, tasks map[string]taskCheckpointStatistics, job *jobView, subs []*weirv1.SubtaskCheckpointStats) any {
	switch c.GetStatus() {
	case weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED:
		return toCompleted(c, f, tasks)
	case weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED:
		return toFailed(c, f, tasks, job, subs)
	}
	return toPending(c, f, tasks, job, subs)
}

// acked returns a vertex's acknowledged subtasks by index.
func acked(v vertexView, subs []*weirv1.SubtaskCheckpointStats) map[int32]*weirv1.SubtaskCheckpointStats {
	m := map[int32]*weirv1.SubtaskCheckpointStats{}
	for _, s := range subs {
		if s.GetVertex() == v.name && s.GetAcknowledged() {
			m[s.GetSubtaskIndex()] = s
		}
	}
	return m
}

// subtaskCheckpointedSize is what a subtask uploaded for a checkpoint: less
// than its state size when an incremental checkpoint referenced files of
// earlier ones.
func subtaskCheckpointedSize(s *weirv1.SubtaskCheckpointStats) int64 { return s.GetCheckpointedSize() }

func toTaskStats(c *weirv1.CheckpointStats, v vertexView, subs []*weirv1.SubtaskCheckpointStats) taskCheckpointStatistics {
	t := taskCheckpointStatistics{
		ID: c.GetId(), Status: c.GetStatus().FlinkName(), LatestAckTimestamp: -1, EndToEndDuration: -1,
		NumSubtasks: v.parallelism, Name: v.name,
	}
	var vsubs []*weirv1.SubtaskCheckpointStats
	for _, s := range acked(v, subs) {
		vsubs = append(vsubs, s)
		t.NumAcknowledgedSubtasks++
		t.LatestAckTimestamp = max(t.LatestAckTimestamp, s.GetAckTimestampMs())
		t.StateSize += s.GetStateSize()
		t.CheckpointedSize += subtaskCheckpointedSize(s)
	}
	f := sumInFlight(vsubs)
	t.AlignmentBuffered, t.ProcessedData, t.PersistedData = f.buffered, f.processed, f.persisted
	if t.LatestAckTimestamp > 0 {
		t.EndToEndDuration = max(0, t.LatestAckTimestamp-c.GetTriggerTimestampMs())
	}
	return t
}

// taskStatsByID is CheckpointStatistics.tasks: every vertex by REST ID.
// Without per-subtask data (the core drops it when a job ends) it is empty,
// as Flink's history entries are, rather than claiming zero acks.
func taskStatsByID(c *weirv1.CheckpointStats, job *jobView, subs []*weirv1.SubtaskCheckpointStats) map[string]taskCheckpointStatistics {
	out := map[string]taskCheckpointStatistics{}
	if len(subs) == 0 && c.GetNumAcknowledgedSubtasks() > 0 {
		return out
	}
	for _, v := range job.vertices {
		out[v.id] = toTaskStats(c, v, subs)
	}
	return out
}

func toSubtaskDetails(c *weirv1.CheckpointStats, v vertexView, subs []*weirv1.SubtaskCheckpointStats) taskCheckpointStatisticsWithSubtaskDetails {
	out := taskCheckpointStatisticsWithSubtaskDetails{taskCheckpointStatistics: toTaskStats(c, v, subs), Subtasks: []any{}}
	byIndex := acked(v, subs)
	var cps, sizes, e2e, syncs, asyncs, buf, proc, pers, align, delay []int64
	for i := int32(0); i < v.parallelism; i++ {
		s, ok := byIndex[i]
		if !ok {
			out.Subtasks = append(out.Subtasks, pendingSubtaskCheckpointStatistics{ClassName: classPending, Index: i, Status: "pending_or_failed",
				checkpointPhase: phaseOf(unackedOf(v, subs, i))})
			continue
		}
		m := s.GetMetrics()
		cs := completedSubtaskCheckpointStatistics{
			ClassName: classCompleted, Index: i, Status: "completed", AckTimestamp: s.GetAckTimestampMs(),
			EndToEndDuration: s.GetEndToEndDurationMs(), CheckpointedSize: subtaskCheckpointedSize(s), StateSize: s.GetStateSize(),
			Checkpoint: checkpointDuration{Sync: m.GetSyncDurationMs(), Async: m.GetAsyncDurationMs()},
			Alignment: checkpointAlignment{
				Buffered: m.GetBytesBufferedDuringAlignment(), Processed: m.GetBytesBufferedDuringAlignment(),
				Persisted: m.GetBytesPersistedDuringAlignment(), Duration: m.GetAlignmentDurationMs(),
			},
			StartDelay: m.GetStartDelayMs(), UnalignedCheckpoint: m.GetUnaligned(),
		}
		out.Subtasks = append(out.Subtasks, cs)
		cps = append(cps, cs.CheckpointedSize)
		sizes = append(sizes, cs.StateSize)
		e2e = append(e2e, cs.EndToEndDuration)
		syncs = append(syncs, cs.Checkpoint.Sync)
		asyncs = append(asyncs, cs.Checkpoint.Async)
		buf = append(buf, cs.Alignment.Buffered)
		proc = append(proc, cs.Alignment.Processed)
		pers = append(pers, cs.Alignment.Persisted)
		align = append(align, cs.Alignment.Duration)
		delay = append(delay, cs.StartDelay)
	}
	out.Summary = taskCheckpointSummary{
		CheckpointedSize: summarize(cps), StateSize: summarize(sizes), EndToEndDuration: summarize(e2e),
		CheckpointDuration: checkpointDurationSummary{Sync: summarize(syncs), Async: summarize(asyncs)},
		Alignment: checkpointAlignSummary{
			Buffered: summarize(buf), Processed: summarize(proc), Persisted: summarize(pers), Duration: summarize(align),
		},
		StartDelay: summarize(delay),
	}
	return out
}

// toCheckpointingStatistics builds /jobs/{id}/checkpoints. details holds
// GetCheckpoint answers by checkpoint ID where the core had them; the
// in-flight figures of a checkpoint come from there.
func toCheckpointingStatistics(list *weirv1.ListCheckpointsResponse, job *jobView, details map[int64]*weirv1.GetCheckpointResponse) checkpointingStatistics {
	flight := func(c *weirv1.CheckpointStats) inFlight {
		if d, ok := details[c.GetId()]; ok {
			return sumInFlight(d.GetSubtasks())
		}
		return inFlight{}
	}
	subsOf := func(c *weirv1.CheckpointStats) []*weirv1.SubtaskCheckpointStats {
		return details[c.GetId()].GetSubtasks()
	}
	cnt := list.GetCounts()
	out := checkpointingStatistics{
		Counts: checkpointCounts{
			Restored: cnt.GetRestored(), Total: cnt.GetTotal(), InProgress: cnt.GetInProgress(),
			Completed: cnt.GetCompleted(), Failed: cnt.GetFailed(),
		},
		History: []any{},
	}
	var cps, sizes, e2e, buf, proc, pers []int64
	for _, c := range list.GetHistory() {
		f := flight(c)
		// History entries carry no per-task statistics, as in Flink.
		out.History = append(out.History, toCheckpoint(c, f, nil, job, subsOf(c)))
		if c.GetStatus() != weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED {
			continue
		}
		cps = append(cps, c.GetCheckpointedSize())
		sizes = append(sizes, c.GetStateSize())
		e2e = append(e2e, c.GetEndToEndDurationMs())
		if f.known {
			buf = append(buf, f.buffered)
			proc = append(proc, f.processed)
			pers = append(pers, f.persisted)
		}
	}
	out.Summary = checkpointingSummary{
		CheckpointedSize: summarize(cps), StateSize: summarize(sizes), EndToEndDuration: summarize(e2e),
		AlignmentBuffered: summarize(buf), ProcessedData: summarize(proc), PersistedData: summarize(pers),
	}
	if c := list.GetLatestCompleted(); c != nil {
		out.Latest.Completed = toCompleted(c, flight(c), nil)
	}
	if c := list.GetLatestSavepoint(); c != nil {
		out.Latest.Savepoint = toCompleted(c, flight(c), nil)
	}
	if c := list.GetLatestFailed(); c != nil {
		out.Latest.Failed = toFailed(c, flight(c), nil, job, subsOf(c))
	}
	if r := list.GetLatestRestored(); r != nil {
		out.Latest.Restored = &restoredCheckpointStatistics{
			ID: r.GetId(), RestoreTimestamp: r.GetRestoreTimestampMs(), IsSavepoint: r.GetIsSavepoint(),
			ExternalPath: strPtr(pointer(r.GetExternalPath())),
		}
	}
	if n := list.GetNextCheckpoint(); n != nil {
		out.NextCheckpoint = &nextCheckpoint{
			State:        n.GetState().Name(),
			Reason:       n.GetReason().Name(),
			Message:      n.GetMessage(),
			DueTimestamp: n.GetDueTimestampMs(),
			Queued:       n.GetQueued(),
		}
	}
	return out
}

// unackedOf returns the statistics of subtask i of v, which has not
// acknowledged; a bare entry when the core has none.
func unackedOf(v vertexView, subs []*weirv1.SubtaskCheckpointStats, i int32) *weirv1.SubtaskCheckpointStats {
	for _, s := range subs {
		if s.GetVertex() == v.name && s.GetSubtaskIndex() == i {
			return s
		}
	}
	return &weirv1.SubtaskCheckpointStats{}
}
