//go:build failpoints

package jobmanager_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/testcluster"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestRescaleStoredOnceTheStoreAnswers: etcd refuses the job's graph
// while a rescale is under way, longer than the client waits. The call
// fails, the job runs at its new shape, and the JobManager keeps
// storing it until etcd takes it: a standby that takes over afterwards
// recovers the job at its new parallelism, not the old one.
func TestRescaleStoredOnceTheStoreAnswers(t *testing.T) {
	etcd := testcluster.StartEtcd(t)
	first := testcluster.Start(t, testcluster.Options{Etcd: etcd})
	first.WaitLeader()
	standby := testcluster.Start(t, testcluster.Options{Etcd: etcd})
	first.StartTaskManager("tm-1", 4, nil)
	c := &inProcess{Cluster: first, t: t}
	g := &weirv1.JobGraph{
		Name:          "rescale-store",
		Checkpointing: &weirv1.CheckpointConfig{Interval: durationpb.New(100 * time.Millisecond)},
		Vertices:      c.pipeline("a", 0, 1),
	}
	r, err := first.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetJobId()
	first.WaitJob(id, "running", allRunning(0))

	if err := fault.Enable(fault.JMStoreJob, `return("etcd-down")`); err != nil {
		t.Fatal(err)
	}
	defer fault.Disable(fault.JMStoreJob) //nolint:errcheck
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = first.Client.RescaleJob(ctx, &weirv1.RescaleJobRequest{JobId: id, Parallelism: map[string]int32{"a-source": 2, "a-sink": 2}})
	cancel()
	// The client's deadline passes first, or the JobManager says so.
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
		t.Fatalf("rescale while etcd refuses the job: %v, want Unavailable or DeadlineExceeded", err)
	}
	t.Logf("the client is told: %v", err)
	first.WaitJob(id, "running at the new parallelism", func(j *weirv1.JobInfo) bool {
		return allRunning(0)(j) || allRunning(1)(j) && len(j.GetVertices()[1].GetSubtasks()) == 2
	})
	if err := fault.Disable(fault.JMStoreJob); err != nil {
		t.Fatal(err)
	}

	// etcd answers again: the rescale is stored in the background.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	jobs, err := ha.NewEtcdJobStore(ha.Config{Client: cli, ClusterID: "test"}, ha.Fence{})
	if err != nil {
		t.Fatal(err)
	}
	poll.UntilNoError(t, 30*time.Second, 50*time.Millisecond, "the rescaled graph stored", func() (bool, error) {
		stored, err := jobs.List(context.Background())
		if err != nil {
			return false, err
		}
		for _, j := range stored {
			sg := &weirv1.JobGraph{}
			if err := proto.Unmarshal(j.Graph, sg); err != nil {
				return false, err
			}
			if j.ID == id {
				return sg.GetVertices()[1].GetParallelism() == 2, nil
			}
		}
		return false, nil
	})

	first.StopJobManager()
	standby.WaitJob(id, "recovered at the new parallelism", func(j *weirv1.JobInfo) bool {
		return j.GetState() == weirv1.JobState_JOB_STATE_RUNNING && len(j.GetVertices()[1].GetSubtasks()) == 2
	})
}

// messages is a slog handler that hands on the messages it logs.
type messages struct{ c chan string }

func (m messages) Enabled(context.Context, slog.Level) bool { return true }
func (m messages) Handle(_ context.Context, r slog.Record) error {
	select {
	case m.c <- r.Message:
	default: // nobody waits for this one
	}
	return nil
}
func (m messages) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m messages) WithGroup(string) slog.Handler      { return m }

// TestRescaleNotStoredAfterTheJobEnded: a rescale whose graph etcd
// refused is still being stored in the background when the job is
// cancelled and its HA data removed. Once etcd answers, the graph must
// not be stored again: the next leader would run the cancelled job anew.
func TestRescaleNotStoredAfterTheJobEnded(t *testing.T) {
	etcd := testcluster.StartEtcd(t)
	logs := messages{c: make(chan string, 1024)}
	first := testcluster.Start(t, testcluster.Options{Etcd: etcd, Logger: slog.New(logs)})
	first.WaitLeader()
	first.StartTaskManager("tm-1", 4, nil)
	c := &inProcess{Cluster: first, t: t}
	r, err := first.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: &weirv1.JobGraph{
		Name:          "rescale-cancelled",
		Checkpointing: &weirv1.CheckpointConfig{Interval: durationpb.New(100 * time.Millisecond)},
		Vertices:      c.pipeline("a", 0, 1),
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetJobId()
	first.WaitJob(id, "running", allRunning(0))

	if err := fault.Enable(fault.JMStoreJob, `return("etcd-down")`); err != nil {
		t.Fatal(err)
	}
	defer fault.Disable(fault.JMStoreJob) //nolint:errcheck
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = first.Client.RescaleJob(ctx, &weirv1.RescaleJobRequest{JobId: id, Parallelism: map[string]int32{"a-source": 2, "a-sink": 2}})
	cancel()
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
		t.Fatalf("rescale while etcd refuses the job: %v, want Unavailable or DeadlineExceeded", err)
	}
	if _, err := first.Client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: id}); err != nil {
		t.Fatal(err)
	}
	first.WaitJob(id, "cancelled", inState(weirv1.JobState_JOB_STATE_CANCELED))
	if err := fault.Disable(fault.JMStoreJob); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Minute)
	for done := false; !done; {
		select {
		case m := <-logs.c:
			switch m {
			case "rescaled job stored":
				t.Fatal("the rescale was stored after the job was cancelled and its HA data removed")
			case "rescaled job no longer stored: a later change was stored, or the job ended":
				done = true
			}
		case <-deadline:
			t.Fatal("the background store of the rescale neither gave up nor stored it within a minute")
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	jobs, err := ha.NewEtcdJobStore(ha.Config{Client: cli, ClusterID: "test"}, ha.Fence{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := jobs.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range stored {
		if j.ID == id {
			t.Fatalf("the cancelled job is stored again: a new leader would run it")
		}
	}
}

// TestAlignedWhileRescaleUnstored: a job with a broadcast edge and
// unaligned checkpoints is rescaled while etcd refuses its graph. Until
// the store takes the new graph, a new leader would restore the job's
// checkpoints at the old parallelism, where records in flight on a
// broadcast edge cannot go: so those checkpoints are aligned, and once
// the graph is stored the job's are unaligned again.
func TestAlignedWhileRescaleUnstored(t *testing.T) {
	etcd := testcluster.StartEtcd(t)
	first := testcluster.Start(t, testcluster.Options{Etcd: etcd})
	first.WaitLeader()
	first.StartTaskManager("tm-1", 4, nil)
	c := &inProcess{Cluster: first, t: t}
	g := &weirv1.JobGraph{
		Name: "aligned-while-unstored",
		Checkpointing: &weirv1.CheckpointConfig{
			Interval: durationpb.New(100 * time.Millisecond), Unaligned: true, Timeout: durationpb.New(time.Minute),
		},
		Vertices: []*weirv1.JobVertex{
			{Name: "src", Operator: "sequence-source", Parallelism: 1, Config: c.config(map[string]any{"count": 0, "keys": 4, "rate": 2000})},
			{Name: "sink", Operator: "file-sink", Parallelism: 1, Config: c.config(map[string]any{"path": t.TempDir()}),
				Inputs: []*weirv1.JobEdge{{Source: "src", Partitioner: weirv1.Partitioner_PARTITIONER_BROADCAST}}},
		},
	}
	r, err := first.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetJobId()
	first.WaitJob(id, "running", allRunning(0))
	// sinkUnaligned waits for a checkpoint after `after` taken at sink
	// parallelism p, and reports whether every sink subtask took it
	// unaligned.
	sinkUnaligned := func(after int64, p int) (int64, bool) {
		t.Helper()
		var got int64
		var unaligned bool
		poll.UntilNoError(t, 30*time.Second, 20*time.Millisecond, "a checkpoint at the sink's parallelism", func() (bool, error) {
			l, err := first.Client.ListCheckpoints(context.Background(), &weirv1.ListCheckpointsRequest{JobId: id})
			if err != nil {
				return false, err
			}
			last := l.GetLatestCompleted()
			if last.GetId() <= after {
				return false, nil
			}
			d, err := first.Client.GetCheckpoint(context.Background(), &weirv1.GetCheckpointRequest{JobId: id, CheckpointId: last.GetId()})
			if err != nil {
				return false, err
			}
			n, all := 0, true
			for _, s := range d.GetSubtasks() {
				if s.GetVertex() == "sink" {
					n++
					all = all && s.GetMetrics().GetUnaligned()
				}
			}
			got, unaligned = last.GetId(), all
			return n == p, nil
		})
		return got, unaligned
	}
	before, unaligned := sinkUnaligned(0, 1)
	if !unaligned {
		t.Fatalf("checkpoint %d of the running job was aligned at the sink: the test cannot tell", before)
	}

	if err := fault.Enable(fault.JMStoreJob, `return("etcd-down")`); err != nil {
		t.Fatal(err)
	}
	defer fault.Disable(fault.JMStoreJob) //nolint:errcheck
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = first.Client.RescaleJob(ctx, &weirv1.RescaleJobRequest{JobId: id, Parallelism: map[string]int32{"sink": 2}})
	cancel()
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
		t.Fatalf("rescale while etcd refuses the job: %v, want Unavailable or DeadlineExceeded", err)
	}
	lagging, unaligned := sinkUnaligned(before, 2)
	if unaligned {
		t.Fatalf("checkpoint %d, at the new parallelism while etcd holds the old one, is unaligned: a new leader could not restore its broadcast edge's records in flight", lagging)
	}
	if err := fault.Disable(fault.JMStoreJob); err != nil {
		t.Fatal(err)
	}
	// Stored in the background: the job's own mode again.
	poll.UntilNoError(t, 30*time.Second, 50*time.Millisecond, "unaligned checkpoints again", func() (bool, error) {
		_, unaligned := sinkUnaligned(lagging, 2)
		return unaligned, nil
	})
}
