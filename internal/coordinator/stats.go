package coordinator

import (
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Stats is the checkpoint history shown by the API, shaped like Flink's
// /jobs/{id}/checkpoints.
type Stats struct {
	size    int
	counts  *weirv1.CheckpointCounts
	byID    map[int64]*entry
	order   []int64 // oldest first, at most size
	latestC *weirv1.CheckpointStats
	latestS *weirv1.CheckpointStats
	latestF *weirv1.CheckpointStats
	latestR *weirv1.RestoredCheckpoint
}

type entry struct {
	stats    *weirv1.CheckpointStats
	subtasks map[string]*weirv1.SubtaskCheckpointStats
	// triggered is the trigger time with its monotonic reading: durations
	// are measured from it, not from the wall-clock TriggerTimestampMs, so
	// that the clock being set during a checkpoint does not show (and
	// export as a metric) an hour-long or negative checkpoint.
	triggered time.Time
}

func (e *entry) sinceTrigger(now time.Time) int64 { return now.Sub(e.triggered).Milliseconds() }

func newStats(size int) *Stats {
	return &Stats{size: size, byID: map[int64]*entry{}, counts: &weirv1.CheckpointCounts{}}
}

// started records a new checkpoint; every subtask it waits for is listed,
// unacknowledged, so the API can say which ones a slow checkpoint waits on.
func (s *Stats) started(id int64, typ weirv1.CheckpointType, now time.Time, tasks []*weirv1.ExecutionAttemptID) {
	s.counts.Total++
	s.counts.InProgress++
	e := &entry{
		stats: &weirv1.CheckpointStats{
			Id: id, Status: weirv1.CheckpointStatus_CHECKPOINT_STATUS_IN_PROGRESS,
			IsSavepoint: typ != weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT, CheckpointType: typ,
			TriggerTimestampMs: now.UnixMilli(), NumSubtasks: int32(len(tasks)),
		},
		subtasks:  make(map[string]*weirv1.SubtaskCheckpointStats, len(tasks)),
		triggered: now,
	}
	for _, a := range tasks {
		e.subtasks[a.Key()] = &weirv1.SubtaskCheckpointStats{Vertex: a.GetVertex(), SubtaskIndex: a.GetSubtaskIndex()}
	}
	s.byID[id] = e
	s.order = append(s.order, id)
	if len(s.order) > s.size {
		old := s.byID[s.order[0]]
		if old.stats.Status == weirv1.CheckpointStatus_CHECKPOINT_STATUS_IN_PROGRESS {
			// Dropped from the history while still running: keep the
			// in-progress count honest (its outcome is no longer tracked).
			s.counts.InProgress--
		}
		delete(s.byID, s.order[0])
		s.order = s.order[1:]
	}
}

func (s *Stats) declined(id int64, d *weirv1.DeclineCheckpointRequest) {
	e := s.byID[id]
	if e == nil {
		return
	}
	if st := e.subtasks[d.GetAttempt().Key()]; st != nil {
		st.Declined, st.DeclineMessage = true, d.GetMessage()
		st.Phase = weirv1.CheckpointPhase_CHECKPOINT_PHASE_DECLINED
	}
}

func (s *Stats) restored(id int64, path string, savepoint bool, now time.Time) {
	s.counts.Restored++
	s.latestR = &weirv1.RestoredCheckpoint{Id: id, RestoreTimestampMs: now.UnixMilli(), IsSavepoint: savepoint, ExternalPath: path}
}

func (s *Stats) acked(id int64, now time.Time, ack *weirv1.AcknowledgeCheckpointRequest) {
	e := s.byID[id]
	if e == nil {
		return
	}
	st := e.stats
	st.NumAcknowledgedSubtasks++
	st.LatestAckTimestampMs = now.UnixMilli()
	st.EndToEndDurationMs = e.sinceTrigger(now)
	st.StateSize += ack.GetState().GetStateSize()
	st.CheckpointedSize += ack.GetState().GetCheckpointedSize()
	a := ack.GetAttempt()
	e.subtasks[a.Key()] = &weirv1.SubtaskCheckpointStats{
		Vertex: a.GetVertex(), SubtaskIndex: a.GetSubtaskIndex(), Acknowledged: true,
		AckTimestampMs: now.UnixMilli(), EndToEndDurationMs: e.sinceTrigger(now),
		StateSize: ack.GetState().GetStateSize(), CheckpointedSize: ack.GetState().GetCheckpointedSize(), Metrics: ack.GetMetrics(),
		Phase: weirv1.CheckpointPhase_CHECKPOINT_PHASE_ACKNOWLEDGED, PhaseReportedMs: now.UnixMilli(),
	}
}

// progress records how far a subtask got with checkpoint id, as its
// TaskManager reported it at now, while the subtask has neither acked
// nor declined: an expired checkpoint then says where each subtask was.
func (s *Stats) progress(id int64, a *weirv1.ExecutionAttemptID, p *weirv1.CheckpointProgress, now time.Time) {
	e := s.byID[id]
	if e == nil || e.stats.GetStatus() != weirv1.CheckpointStatus_CHECKPOINT_STATUS_IN_PROGRESS {
		return
	}
	st := e.subtasks[a.Key()]
	if st == nil || st.GetAcknowledged() || st.GetDeclined() {
		return
	}
	st.Phase, st.BarriersReceived, st.Channels, st.PhaseReportedMs = p.GetPhase(), p.GetBarriersReceived(), p.GetChannels(), now.UnixMilli()
}

func (s *Stats) completed(id int64, now time.Time, path string) {
	e := s.byID[id]
	if e == nil {
		return
	}
	s.counts.InProgress--
	s.counts.Completed++
	e.stats.Status = weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED
	e.stats.ExternalPath = path
	e.stats.EndToEndDurationMs = e.sinceTrigger(now)
	if e.stats.IsSavepoint {
		s.latestS = e.stats
	} else {
		s.latestC = e.stats
	}
}

func (s *Stats) failed(id int64, savepoint bool, now time.Time, f *Failure) {
	e := s.byID[id]
	if e == nil || e.stats.Status != weirv1.CheckpointStatus_CHECKPOINT_STATUS_IN_PROGRESS {
		return
	}
	s.counts.InProgress--
	s.counts.Failed++
	e.stats.Status = weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED
	e.stats.FailureReason = f.Reason
	e.stats.FailureMessage = f.Error()
	e.stats.FailureTimestampMs = now.UnixMilli()
	e.stats.EndToEndDurationMs = e.sinceTrigger(now)
	s.latestF = e.stats
}

// snapshot copies the stats so callers on other goroutines can keep them.
func (s *Stats) snapshot() *weirv1.ListCheckpointsResponse {
	out := &weirv1.ListCheckpointsResponse{Counts: proto.Clone(s.counts).(*weirv1.CheckpointCounts)}
	for i := len(s.order) - 1; i >= 0; i-- {
		out.History = append(out.History, proto.Clone(s.byID[s.order[i]].stats).(*weirv1.CheckpointStats))
	}
	clone := func(c *weirv1.CheckpointStats) *weirv1.CheckpointStats {
		if c == nil {
			return nil
		}
		return proto.Clone(c).(*weirv1.CheckpointStats)
	}
	out.LatestCompleted, out.LatestSavepoint, out.LatestFailed = clone(s.latestC), clone(s.latestS), clone(s.latestF)
	if s.latestR != nil {
		out.LatestRestored = proto.Clone(s.latestR).(*weirv1.RestoredCheckpoint)
	}
	return out
}

func (s *Stats) detail(id int64) (*weirv1.GetCheckpointResponse, bool) {
	e := s.byID[id]
	if e == nil {
		return nil, false
	}
	out := &weirv1.GetCheckpointResponse{Checkpoint: proto.Clone(e.stats).(*weirv1.CheckpointStats)}
	for _, st := range e.subtasks {
		out.Subtasks = append(out.Subtasks, proto.Clone(st).(*weirv1.SubtaskCheckpointStats))
	}
	sort.Slice(out.Subtasks, func(i, j int) bool {
		a, b := out.Subtasks[i], out.Subtasks[j]
		if a.Vertex != b.Vertex {
			return a.Vertex < b.Vertex
		}
		return a.SubtaskIndex < b.SubtaskIndex
	})
	return out, true
}
