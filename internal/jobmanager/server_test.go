package jobmanager_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/testcluster"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// inProcess is the shared in-process cluster with this file's job
// builders.
type inProcess struct {
	*testcluster.Cluster
	t *testing.T
}

func startInProcess(t *testing.T) *inProcess {
	// Default heartbeats: a stopped TaskManager is noticed by its
	// reports and dropped connections, and a short timeout would make a
	// loaded machine lose TaskManagers the test did not stop.
	return &inProcess{Cluster: testcluster.Start(t, testcluster.Options{}), t: t}
}

func (c *inProcess) startTM(id string, slots int) { c.StartTaskManager(id, slots, nil) }

func (c *inProcess) stopTM(id string) { c.StopTaskManager(id) }

func (c *inProcess) config(m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// pipeline is a source and a file sink in a slot-sharing group of their
// own; count 0 is unbounded.
func (c *inProcess) pipeline(name string, count, parallelism int32) []*weirv1.JobVertex {
	return []*weirv1.JobVertex{
		{Name: name + "-source", Operator: "sequence-source", Parallelism: parallelism, SlotSharingGroup: name,
			Config: c.config(map[string]any{"count": count, "keys": 4, "rate": 0})},
		{Name: name + "-sink", Operator: "file-sink", Parallelism: parallelism, SlotSharingGroup: name,
			Config: c.config(map[string]any{"path": filepath.Join(c.Dir, name)}),
			Inputs: []*weirv1.JobEdge{{Source: name + "-source", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}}},
	}
}

func (c *inProcess) submit(name string, vertices ...*weirv1.JobVertex) string {
	g := &weirv1.JobGraph{
		Name:            name,
		Checkpointing:   &weirv1.CheckpointConfig{Interval: durationpb.New(100 * time.Millisecond)},
		RestartStrategy: &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 5, Delay: durationpb.New(10 * time.Millisecond)},
		Vertices:        vertices,
	}
	r, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		c.t.Fatal(err)
	}
	return r.GetJobId()
}

// wait polls the job until cond holds for it.
func (c *inProcess) wait(id, what string, cond func(*weirv1.JobInfo) bool) *weirv1.JobInfo {
	c.t.Helper()
	return c.WaitJob(id, what, cond)
}

func inState(st weirv1.JobState) func(*weirv1.JobInfo) bool {
	return func(j *weirv1.JobInfo) bool { return j.GetState() == st }
}

// allRunning: every subtask of the job runs, each at attempt.
func allRunning(attempt int32) func(*weirv1.JobInfo) bool {
	return func(j *weirv1.JobInfo) bool {
		for _, v := range j.GetVertices() {
			for _, st := range v.GetSubtasks() {
				if st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING || st.GetAttempt() != attempt {
					return false
				}
			}
		}
		return j.GetState() == weirv1.JobState_JOB_STATE_RUNNING
	}
}

// TestJobLifecycleInProcess: a bounded job of two independent pipelines
// finishes, a second one is cancelled, and the JobManager stops with
// nothing left running.
func TestJobLifecycleInProcess(t *testing.T) {
	c := startInProcess(t)
	c.startTM("tm-1", 2)
	finished := c.wait(c.submit("bounded", append(c.pipeline("a", 200, 1), c.pipeline("b", 200, 1)...)...),
		"FINISHED", inState(weirv1.JobState_JOB_STATE_FINISHED))
	if finished.GetRegions() != 2 {
		t.Errorf("bounded job has %d regions, want 2", finished.GetRegions())
	}
	for _, v := range finished.GetVertices() {
		for _, st := range v.GetSubtasks() {
			if st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_FINISHED || st.GetStartTimeMs() == 0 || st.GetEndTimeMs() == 0 {
				t.Errorf("%s/%d: %v, start %d, end %d", v.GetName(), st.GetIndex(), st.GetState(), st.GetStartTimeMs(), st.GetEndTimeMs())
			}
		}
	}

	unbounded := c.submit("unbounded", c.pipeline("c", 0, 1)...)
	c.wait(unbounded, "RUNNING", inState(weirv1.JobState_JOB_STATE_RUNNING))
	if _, err := c.Client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: unbounded}); err != nil {
		t.Fatal(err)
	}
	c.wait(unbounded, "CANCELED", inState(weirv1.JobState_JOB_STATE_CANCELED))
	if _, err := c.Client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: unbounded}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancel of a cancelled job: %v, want FailedPrecondition", err)
	}
}

// TestRegionFailoverInProcess stops the TaskManager that runs only
// pipeline a: a's region restarts on a new TaskManager at attempt 1, b's
// subtasks keep attempt 0, and the exception history names the failure
// and the region it restarted.
func TestRegionFailoverInProcess(t *testing.T) {
	c := startInProcess(t)
	c.startTM("tm-a", 1)
	c.startTM("tm-b", 1)
	id := c.submit("two", append(c.pipeline("a", 0, 1), c.pipeline("b", 0, 1)...)...)
	before := c.wait(id, "all running", allRunning(0))
	var victim string
	for _, v := range before.GetVertices() {
		if v.GetName() == "a-source" {
			victim = v.GetSubtasks()[0].GetTaskmanagerId()
		}
	}
	c.stopTM(victim)
	c.startTM("tm-new", 1)
	after := c.wait(id, "pipeline a on attempt 1", func(j *weirv1.JobInfo) bool {
		for _, v := range j.GetVertices() {
			st := v.GetSubtasks()[0]
			if v.GetName()[:1] == "a" && (st.GetAttempt() != 1 || st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING) {
				return false
			}
		}
		return true
	})
	for _, v := range after.GetVertices() {
		if st := v.GetSubtasks()[0]; v.GetName()[:1] == "b" && (st.GetAttempt() != 0 || st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING) {
			t.Errorf("pipeline b's %s is attempt %d %v after a's failover", v.GetName(), st.GetAttempt(), st.GetState())
		}
	}
	if after.GetState() != weirv1.JobState_JOB_STATE_RUNNING || after.GetRestarts() != 1 {
		t.Errorf("job %v with %d restarts, want RUNNING with 1", after.GetState(), after.GetRestarts())
	}
	ex := after.GetExceptions()
	if len(ex) != 1 || ex[0].GetTaskmanagerId() != victim || ex[0].GetFullRestart() || len(ex[0].GetRegions()) != 1 {
		t.Errorf("exceptions %v, want one on %s restarting one region", ex, victim)
	}
}

// TestRescaleAndReconfigureInProcess rescales a running job and changes its
// checkpoint interval, and checks what the API refuses.
func TestRescaleAndReconfigureInProcess(t *testing.T) {
	c := startInProcess(t)
	c.startTM("tm-1", 4)
	id := c.submit("rescaled", c.pipeline("a", 0, 2)...)
	c.wait(id, "all running", allRunning(0))
	for _, bad := range []map[string]int32{{"nope": 2}, {"a-source": 0}, {"a-source": 3}} {
		// a-source=3 alone breaks the forward edge to a-sink (parallelism 2).
		if _, err := c.Client.RescaleJob(context.Background(), &weirv1.RescaleJobRequest{JobId: id, Parallelism: bad}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("rescale %v: %v, want InvalidArgument", bad, err)
		}
	}
	if _, err := c.Client.RescaleJob(context.Background(), &weirv1.RescaleJobRequest{JobId: id, Parallelism: map[string]int32{"a-source": 8, "a-sink": 8}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("rescale beyond the cluster's slots: %v, want FailedPrecondition", err)
	}
	r, err := c.Client.RescaleJob(context.Background(), &weirv1.RescaleJobRequest{JobId: id, Parallelism: map[string]int32{"a-source": 4, "a-sink": 4}})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetCheckpointId() < 1 {
		t.Errorf("rescale took checkpoint %d", r.GetCheckpointId())
	}
	j := c.wait(id, "running at parallelism 4", func(j *weirv1.JobInfo) bool {
		return allRunning(1)(j) && len(j.GetVertices()[0].GetSubtasks()) == 4
	})
	if j.GetRestarts() != 0 || j.GetGraph().GetVertices()[0].GetParallelism() != 4 {
		t.Errorf("after the rescale: %d restarts, graph parallelism %d", j.GetRestarts(), j.GetGraph().GetVertices()[0].GetParallelism())
	}

	cfg, err := c.Client.ConfigureCheckpointing(context.Background(), &weirv1.ConfigureCheckpointingRequest{JobId: id, Interval: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GetCheckpointing().GetInterval().AsDuration() != time.Hour {
		t.Errorf("interval now %v", cfg.GetCheckpointing().GetInterval().AsDuration())
	}
	if got := c.wait(id, "graph updated", func(*weirv1.JobInfo) bool { return true }).GetGraph().GetCheckpointing().GetInterval().AsDuration(); got != time.Hour {
		t.Errorf("job graph's interval %v, want 1h", got)
	}
	if _, err := c.Client.ConfigureCheckpointing(context.Background(), &weirv1.ConfigureCheckpointingRequest{JobId: id}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("configure nothing: %v, want InvalidArgument", err)
	}
	if _, err := c.Client.ConfigureCheckpointing(context.Background(), &weirv1.ConfigureCheckpointingRequest{JobId: "nope", Interval: durationpb.New(time.Second)}); status.Code(err) != codes.NotFound {
		t.Errorf("configure an unknown job: %v, want NotFound", err)
	}
}

// TestRestartBudgetSurvivesLeaderChange: a job allowed one restart uses it,
// its JobManager leader stops and a standby takes over; the next failure
// must fail the job, as it would have on the first leader, rather than find
// a fresh budget on the new one.
func TestRestartBudgetSurvivesLeaderChange(t *testing.T) {
	etcd := testcluster.StartEtcd(t)
	first := testcluster.Start(t, testcluster.Options{Etcd: etcd})
	first.WaitLeader()
	standby := testcluster.Start(t, testcluster.Options{Etcd: etcd})
	first.StartTaskManager("tm-1", 1, nil)
	c := &inProcess{Cluster: first, t: t}
	g := &weirv1.JobGraph{
		Name:            "budget",
		Checkpointing:   &weirv1.CheckpointConfig{Interval: durationpb.New(100 * time.Millisecond)},
		RestartStrategy: &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 1, Delay: durationpb.New(10 * time.Millisecond)},
		Vertices:        c.pipeline("a", 0, 1),
	}
	r, err := first.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetJobId()
	first.WaitJob(id, "running", allRunning(0))

	// The one restart allowed.
	first.StopTaskManager("tm-1")
	first.StartTaskManager("tm-2", 1, nil)
	if j := first.WaitJob(id, "running again", allRunning(1)); j.GetRestarts() != 1 {
		t.Fatalf("%d restarts after one failure", j.GetRestarts())
	}

	first.StopJobManager()
	recovered := standby.WaitJob(id, "recovered by the new leader", func(j *weirv1.JobInfo) bool {
		return allRunning(1)(j) // adopted: the attempts that ran go on
	})
	if recovered.GetRestarts() != 1 {
		t.Errorf("the new leader counts %d restarts, want 1", recovered.GetRestarts())
	}

	first.StopTaskManager("tm-2")
	failed := standby.WaitJob(id, "FAILED", inState(weirv1.JobState_JOB_STATE_FAILED))
	if !strings.Contains(failed.GetFailureCause(), "not restarted") {
		t.Errorf("failure cause %q does not say the budget was used up", failed.GetFailureCause())
	}
}

// backlogSource emits nothing and reports a backlog while backlog is set.
type backlogSource struct{ backlog *atomic.Bool }

func (backlogSource) Open(sdk.Context) error { return nil }
func (s backlogSource) Emit(sdk.Collector) (sdk.SourceStatus, error) {
	b := sdk.NoBacklog
	if s.backlog.Load() {
		b = sdk.ProcessingBacklog
	}
	return sdk.SourceStatus{Backoff: 10 * time.Millisecond, Backlog: b}, nil
}
func (backlogSource) Close() error { return nil }

// TestIntervalDuringBacklog: a source's backlog report travels with the
// TaskManager's heartbeats to the coordinator, which checkpoints at the
// interval during backlog while it lasts and at the interval after.
func TestIntervalDuringBacklog(t *testing.T) {
	c := startInProcess(t)
	var backlog atomic.Bool
	backlog.Store(true)
	reg := sdk.NewRegistry()
	reg.RegisterSource("backlog-source", func() sdk.Source { return backlogSource{&backlog} })
	c.StartTaskManager("tm-1", 1, reg)
	g := &weirv1.JobGraph{
		Name: "backlog",
		Checkpointing: &weirv1.CheckpointConfig{
			Interval: durationpb.New(100 * time.Millisecond), IntervalDuringBacklog: durationpb.New(time.Hour),
		},
		Vertices: []*weirv1.JobVertex{{Name: "src", Operator: "backlog-source", Parallelism: 1}},
	}
	r, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetJobId()
	every := func(want string) {
		t.Helper()
		poll.UntilNoError(t, 30*time.Second, 20*time.Millisecond, "checkpoints every "+want, func() (bool, error) {
			cps, err := c.Client.ListCheckpoints(context.Background(), &weirv1.ListCheckpointsRequest{JobId: id})
			if err != nil {
				return false, err
			}
			return strings.HasSuffix(cps.GetNextCheckpoint().GetMessage(), "every "+want), nil
		})
	}
	every("1h0m0s")
	backlog.Store(false)
	every("100ms")
}
