package jobmanager

import (
	"sync"

	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// subtaskLoads holds the latest load a TaskManager reported for each
// subtask attempt it runs. Every heartbeat replaces the whole set, so the
// attempts that stopped running there drop out; a TaskManager that is lost
// takes its set with it. Its own lock is a leaf: it is taken under s.mu
// (heartbeats) and under a job's lock (job info) but never holds either.
type subtaskLoads struct {
	mu sync.Mutex
	m  map[string]*weirv1.SubtaskLoadReport
}

// replace makes reports the TaskManager's current set.
func (l *subtaskLoads) replace(reports []*weirv1.SubtaskLoadReport) {
	m := make(map[string]*weirv1.SubtaskLoadReport, len(reports))
	for _, r := range reports {
		if r.GetAttempt() != nil && r.GetLoad() != nil {
			m[r.GetAttempt().Key()] = r
		}
	}
	l.mu.Lock()
	l.m = m
	l.mu.Unlock()
}

// get returns the latest report of attempt a, nil when none was
// reported. The message is shared: callers must not modify it.
func (l *subtaskLoads) get(a *weirv1.ExecutionAttemptID) *weirv1.SubtaskLoadReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[a.Key()]
}

// load is the latest load and event time reported for a running attempt,
// or the totals a finished one reported last. Any other stopped one has
// none, even while its lost TaskManager still holds its last report.
func (v *jobView) load(e scheduler.Exec) (*weirv1.SubtaskInfo_Load, *weirv1.SubtaskWatermarks) {
	if e.State == weirv1.ExecutionState_EXECUTION_STATE_FINISHED {
		return v.finalLoads[e.Attempt.Key()], nil
	}
	tm := v.tms[e.TaskManager]
	if e.State != weirv1.ExecutionState_EXECUTION_STATE_RUNNING || tm == nil {
		return nil, nil
	}
	r := tm.loads.get(e.Attempt)
	return r.GetLoad(), r.GetWatermarks()
}

// addVertexLoad fills v's load from its subtasks' loads: records, times and
// record rates add up; the ms-per-second figures are the maximum over the
// subtasks, the way Flink rates a vertex's back-pressure (its busiest or
// most back-pressured subtask is the bottleneck).
func addVertexLoad(v *weirv1.VertexInfo) {
	var sum *weirv1.SubtaskInfo_Load
	n := int32(0)
	for _, st := range v.GetSubtasks() {
		l := st.GetLoad()
		if l == nil {
			continue
		}
		n++
		if sum == nil {
			sum = &weirv1.SubtaskInfo_Load{}
		}
		sum.IdleMsPerSecond = max(sum.IdleMsPerSecond, l.GetIdleMsPerSecond())
		sum.BackpressuredMsPerSecond = max(sum.BackpressuredMsPerSecond, l.GetBackpressuredMsPerSecond())
		sum.BusyMsPerSecond = max(sum.BusyMsPerSecond, l.GetBusyMsPerSecond())
		sum.RecordsInPerSecond += l.GetRecordsInPerSecond()
		sum.RecordsOutPerSecond += l.GetRecordsOutPerSecond()
		sum.RecordsIn += l.GetRecordsIn()
		sum.RecordsOut += l.GetRecordsOut()
		sum.IdleMs += l.GetIdleMs()
		sum.BackpressuredMs += l.GetBackpressuredMs()
		sum.BusyMs += l.GetBusyMs()
		sum.IntervalMs = max(sum.IntervalMs, l.GetIntervalMs())
		sum.TimestampMs = max(sum.TimestampMs, l.GetTimestampMs())
	}
	v.Load, v.LoadReported = sum, n
}
