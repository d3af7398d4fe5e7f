package jobmanager

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/kubeha"
	"github.com/weirproject/weir/internal/restart"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// checkpointCounter hands out a job's checkpoint IDs.
type checkpointCounter interface {
	Next(ctx context.Context) (int64, error)
	SetIfHigher(ctx context.Context, v int64) error
	Shutdown(ctx context.Context, discard bool) error
}

// checkpointStore is a job's completed-checkpoint store.
type checkpointStore interface {
	Add(ctx context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error)
	All(ctx context.Context) ([]checkpoint.Completed, error)
	// RecoverReport returns the readable entries, oldest first, and the
	// ones it skipped.
	RecoverReport(ctx context.Context, validate func(checkpoint.Completed) error) ([]checkpoint.Completed, []ha.SkippedCheckpoint, error)
	Shutdown(ctx context.Context, discard bool) ([]checkpoint.Completed, error)
}

// haServices is the metadata a leader must not lose, for one leadership
// term: standalone (memory and the checkpoint directory), etcd or
// Kubernetes (every write fenced by the term's leadership).
type haServices interface {
	jobServices(jobID string, retained int) (checkpointCounter, checkpointStore, error)
	putJob(ctx context.Context, id string, g *weirv1.JobGraph) error
	// putStatus records what a new leader carries on besides the graph.
	putStatus(ctx context.Context, id string, st jobStatus) error
	removeJob(ctx context.Context, id string) error
	jobs(ctx context.Context) (map[string]storedJob, error)
}

// jobStatus is the part of a job's history that survives a change of
// leader, so that the restart count and uptime users see do not start over.
type jobStatus struct {
	Restarts    int32 `json:"restarts"`
	SubmittedMs int64 `json:"submitted_ms"`
	// Budget is what the restart strategy used up.
	Budget restart.Budget `json:"restart_budget"`
	// Attempts is every subtask's current attempt, recorded before any of
	// them was deployed: a new leader adopts those its TaskManagers still
	// run (scheduler.Adoption).
	Attempts []recordedAttempt `json:"attempts,omitempty"`
}

// recordedAttempt is one subtask's current attempt in a jobStatus.
type recordedAttempt struct {
	Vertex  string `json:"vertex"`
	Subtask int32  `json:"subtask"`
	Attempt int32  `json:"attempt"`
	Session string `json:"session"`
	// TaskManager is where it was deployed, and Identity the certificate
	// that TaskManager registered with (mutual TLS; "" without): only
	// they may report it to a new leader.
	TaskManager string `json:"taskmanager_id,omitempty"`
	Identity    string `json:"identity,omitempty"`
}

// id is the recorded attempt of job.
func (a recordedAttempt) id(job string) *weirv1.ExecutionAttemptID {
	return &weirv1.ExecutionAttemptID{JobId: job, Vertex: a.Vertex, SubtaskIndex: a.Subtask, Attempt: a.Attempt, Session: a.Session}
}

// attempts are the recorded attempts of job id.
func (st jobStatus) attempts(id string) []scheduler.Placed {
	out := make([]scheduler.Placed, len(st.Attempts))
	for i, a := range st.Attempts {
		out[i] = scheduler.Placed{Attempt: a.id(id), TaskManager: a.TaskManager}
	}
	return out
}

// identities maps each recorded attempt of job id (by its key) to the
// identity of the TaskManager it was deployed to.
func (st jobStatus) identities(id string) map[string]string {
	out := make(map[string]string, len(st.Attempts))
	for _, a := range st.Attempts {
		out[a.id(id).Key()] = a.Identity
	}
	return out
}

type storedJob struct {
	graph  *weirv1.JobGraph
	status jobStatus // zero when none was stored
	// err: the stored graph does not decode (graph is nil).
	err error
}

// standaloneServices keeps jobs in memory: a restarted standalone
// JobManager starts empty, but never reuses a checkpoint ID in storage.
type standaloneServices struct{ s *Server }

func (h standaloneServices) jobServices(jobID string, retained int) (checkpointCounter, checkpointStore, error) {
	highest, err := h.s.storage.HighestCheckpointID(jobID)
	if err != nil {
		return nil, nil, err
	}
	return standaloneCounter{ha.NewStandaloneCounter(highest)}, ha.NewStandaloneStore(retained), nil
}

func (standaloneServices) putJob(context.Context, string, *weirv1.JobGraph) error { return nil }
func (standaloneServices) putStatus(context.Context, string, jobStatus) error     { return nil }
func (standaloneServices) removeJob(context.Context, string) error                { return nil }
func (standaloneServices) jobs(context.Context) (map[string]storedJob, error)     { return nil, nil }

type standaloneCounter struct{ *ha.StandaloneCounter }

func (standaloneCounter) Shutdown(context.Context, bool) error { return nil }

// graphStore is where a leader keeps the submitted jobs: etcd or
// ConfigMaps.
type graphStore interface {
	Put(ctx context.Context, id string, graph []byte) error
	PutStatus(ctx context.Context, id string, status []byte) error
	Delete(ctx context.Context, id string) error
	List(ctx context.Context) ([]ha.StoredJob, error)
}

// storedJobs is the job half of haServices over a graphStore.
type storedJobs struct{ store graphStore }

func (h storedJobs) putJob(ctx context.Context, id string, g *weirv1.JobGraph) error {
	if err := fault.Point(fault.JMStoreJob); err != nil {
		return err
	}
	b, err := proto.Marshal(g)
	if err != nil {
		return err
	}
	return h.store.Put(ctx, id, b)
}

func (h storedJobs) putStatus(ctx context.Context, id string, st jobStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return h.store.PutStatus(ctx, id, b)
}

func (h storedJobs) removeJob(ctx context.Context, id string) error {
	return h.store.Delete(ctx, id)
}

func (h storedJobs) jobs(ctx context.Context) (map[string]storedJob, error) {
	stored, err := h.store.List(ctx)
	if err != nil {
		return nil, err
	}
	return decodeStoredJobs(stored), nil
}

// etcdServices keeps jobs, counters and completed checkpoints in etcd,
// fenced by the leadership that created them.
type etcdServices struct {
	storedJobs
	cfg   ha.Config
	fence ha.Fence
}

func newEtcdServices(cfg ha.Config, fence ha.Fence) (*etcdServices, error) {
	js, err := ha.NewEtcdJobStore(cfg, fence)
	if err != nil {
		return nil, err
	}
	return &etcdServices{storedJobs: storedJobs{js}, cfg: cfg, fence: fence}, nil
}

func (h *etcdServices) jobServices(jobID string, retained int) (checkpointCounter, checkpointStore, error) {
	c, err := ha.NewEtcdCounter(h.cfg, jobID, h.fence)
	if err != nil {
		return nil, nil, err
	}
	s, err := ha.NewEtcdStore(h.cfg, jobID, retained, h.fence)
	if err != nil {
		return nil, nil, err
	}
	return c, s, nil
}

// decodeStoredJobs decodes what a job store listed.
func decodeStoredJobs(stored []ha.StoredJob) map[string]storedJob {
	out := map[string]storedJob{}
	for _, sj := range stored {
		g := &weirv1.JobGraph{}
		if err := proto.Unmarshal(sj.Graph, g); err != nil {
			// One corrupt entry must not keep the others from recovering.
			out[sj.ID] = storedJob{err: fmt.Errorf("jobmanager: stored job %s: %w", sj.ID, err)}
			continue
		}
		var st jobStatus
		if sj.Status != nil {
			if err := json.Unmarshal(sj.Status, &st); err != nil {
				// Only counters are lost; the job itself is recovered.
				st = jobStatus{}
			}
		}
		out[sj.ID] = storedJob{graph: g, status: st}
	}
	return out
}

// kubeServices keeps jobs, counters and completed checkpoints in
// ConfigMaps on the Kubernetes API server, fenced by the term of the
// leadership that created them.
type kubeServices struct {
	storedJobs
	cfg   kubeha.Config
	fence kubeha.Fence
}

func newKubeServices(cfg kubeha.Config, fence kubeha.Fence) (*kubeServices, error) {
	js, err := kubeha.NewJobStore(cfg, fence)
	if err != nil {
		return nil, err
	}
	return &kubeServices{storedJobs: storedJobs{js}, cfg: cfg, fence: fence}, nil
}

func (h *kubeServices) jobServices(jobID string, retained int) (checkpointCounter, checkpointStore, error) {
	c, err := kubeha.NewCheckpoints(h.cfg, jobID, retained, h.fence)
	if err != nil {
		return nil, nil, err
	}
	return kubeCounter{c}, c, nil
}

// kubeCounter is the counter's face of a job's Checkpoints.
type kubeCounter struct{ *kubeha.Checkpoints }

func (c kubeCounter) Shutdown(ctx context.Context, discard bool) error {
	return c.ShutdownCounter(ctx, discard)
}
