package operator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/kubeha"
	"github.com/weirproject/weir/internal/operator/lifecycle"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/operator/api/v1alpha1"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// AnnotJobManagerAddress on a WeirJob or WeirCluster names the gRPC
// address of its JobManager, for a JobManager the operator does not find
// through the cluster's Lease (one running outside Kubernetes).
const AnnotJobManagerAddress = "weir.dev/jobmanager-address"

// jobManager is a connection to a cluster's leading JobManager.
type jobManager struct {
	conn *grpc.ClientConn
	api  weirv1grpc.ClientServiceClient
}

// dialJobManager reaches the leader of cluster c: at the annotated
// address, else at the address the leader published in the cluster's
// Lease, with the cluster's certificate when TLS is on.
func dialJobManager(ctx context.Context, kube kubernetes.Interface, c cluster, annotations map[string]string, secret *corev1.Secret) (*jobManager, error) {
	addr := annotations[AnnotJobManagerAddress]
	if addr == "" {
		info, ok, err := kubeha.CurrentLeader(ctx, kubeha.Config{Client: kube, Namespace: c.namespace, ClusterID: c.name})
		if err != nil {
			return nil, err
		}
		if !ok || info.RPCAddr == "" {
			return nil, errors.New("no JobManager leads the cluster yet")
		}
		addr = info.RPCAddr
	}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if c.tls() {
		if secret == nil {
			return nil, errors.New("the cluster's TLS secret is not there yet")
		}
		pair, err := tls.X509KeyPair(secret.Data[secretCert], secret.Data[secretKey])
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", c.tlsSecret(), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(secret.Data[secretCA]) {
			return nil, fmt.Errorf("secret %s: no CA certificate", c.tlsSecret())
		}
		creds = credentials.NewTLS(&tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{pair},
			RootCAs:      pool,
			ServerName:   fmt.Sprintf(serverNameFmt, c.name),
		})
	}
	conn, err := rpc.Dial(addr, creds)
	if err != nil {
		return nil, fmt.Errorf("dial the JobManager at %s: %w", addr, err)
	}
	return &jobManager{conn: conn, api: weirv1grpc.NewClientServiceClient(conn)}, nil
}

func (m *jobManager) close() { m.conn.Close() }

// reachable says whether the JobManager answers.
func (m *jobManager) reachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := m.api.ListJobs(ctx, &weirv1.ListJobsRequest{})
	return err == nil
}

func stateName(s weirv1.JobState) string {
	return strings.TrimPrefix(s.String(), "JOB_STATE_")
}

// job observes the job id; nil when the JobManager does not know it.
func (m *jobManager) job(ctx context.Context, id string) (*lifecycle.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := m.api.GetJob(ctx, &weirv1.GetJobRequest{JobId: id})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	j := &lifecycle.Job{State: stateName(resp.GetJob().GetState()), FailureCause: resp.GetJob().GetFailureCause(), StartedFrom: resp.GetJob().GetGraph().GetRestoreFrom()}
	cps, err := m.api.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: id})
	if err != nil {
		// Without it the round would not know the job's newest state.
		return nil, fmt.Errorf("checkpoints of job %s: %w", id, err)
	}
	if n := newest(cps); n.id > 0 {
		j.LatestCheckpoint = &v1alpha1.CheckpointInfo{ID: n.id, Path: n.path}
	}
	return j, nil
}

// state is one restorable state of a job.
type state struct {
	id        int64
	path      string
	savepoint bool
}

// newest is the newest of a job's latest checkpoint, latest savepoint and
// the checkpoint it last restored: a savepoint taken after the last
// checkpoint is the newest state, and restoring from the checkpoint before
// it would repeat what it committed; a job a new JobManager leader
// recovered reports no checkpoint of its own until it takes one, and its
// state is then the one it restored.
func newest(cps *weirv1.ListCheckpointsResponse) state {
	var n state
	for _, s := range []state{
		{cps.GetLatestCompleted().GetId(), cps.GetLatestCompleted().GetExternalPath(), false},
		{cps.GetLatestSavepoint().GetId(), cps.GetLatestSavepoint().GetExternalPath(), true},
		{cps.GetLatestRestored().GetId(), cps.GetLatestRestored().GetExternalPath(), cps.GetLatestRestored().GetIsSavepoint()},
	} {
		if s.path != "" && s.id > n.id {
			n = s
		}
	}
	return n
}

// graph is the job graph of spec, with the resource's overrides applied.
func graph(spec v1alpha1.WeirJobSpec, restore string) (*weirv1.JobGraph, error) {
	g, err := jobgraph.ParseSpec([]byte(spec.Job.Spec))
	if err != nil {
		return nil, fmt.Errorf("the job spec: %w", err)
	}
	if p := spec.Parallelism; p != nil {
		for _, v := range g.GetVertices() {
			v.Parallelism = *p
		}
	}
	if g.Checkpointing == nil {
		g.Checkpointing = &weirv1.CheckpointConfig{}
	}
	if c := spec.Checkpointing; c != nil {
		if c.Interval != nil {
			g.Checkpointing.Interval = durationpb.New(c.Interval.Duration)
		}
		switch c.Mode {
		case "exactly-once":
			g.Checkpointing.Mode = weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE
		case "at-least-once":
			g.Checkpointing.Mode = weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE
		}
	}
	// The operator may cancel a job to upgrade it from its latest
	// checkpoint (last-state), also one submitted in another mode.
	g.Checkpointing.ExternalizedRetention = weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_RETAIN_ON_CANCELLATION
	g.RestoreFrom = restore
	if err := jobgraph.Validate(g); err != nil {
		return nil, fmt.Errorf("the job spec: %w", err)
	}
	return g, nil
}

// parallelism is the highest parallelism of spec's job, 0 when its spec
// does not parse.
func parallelism(spec v1alpha1.WeirJobSpec) int32 {
	g, err := jobgraph.ParseSpec([]byte(spec.Job.Spec))
	if err != nil {
		return 0
	}
	if spec.Parallelism != nil {
		return *spec.Parallelism
	}
	var p int32
	for _, v := range g.GetVertices() {
		p = max(p, v.GetParallelism())
	}
	return p
}

// do carries out one action of the lifecycle on job id.
func (m *jobManager) do(ctx context.Context, a lifecycle.Action, id string) lifecycle.Result {
	switch a.Kind {
	case lifecycle.Submit:
		g, err := graph(a.Spec, a.RestorePath)
		if err != nil {
			// As the JobManager does, the ID before the graph: a job
			// under it is one an earlier submission started.
			if j, jerr := m.job(ctx, a.JobID); jerr != nil || j != nil {
				return lifecycle.Result{Err: errors.Join(err, jerr), Exists: j != nil}
			}
			return lifecycle.Result{Err: err, Refused: true}
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := m.api.SubmitJob(ctx, &weirv1.SubmitJobRequest{Job: g, JobId: a.JobID})
		if err != nil {
			c := status.Code(err)
			return lifecycle.Result{Err: fmt.Errorf("submit: %w", err), Exists: c == codes.AlreadyExists,
				Refused: c == codes.InvalidArgument || c == codes.FailedPrecondition || c == codes.Unimplemented}
		}
		return lifecycle.Result{JobID: resp.GetJobId()}
	case lifecycle.StopWithSavepoint:
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		resp, err := m.api.StopWithSavepoint(ctx, &weirv1.StopWithSavepointRequest{JobId: id})
		if err != nil {
			return lifecycle.Result{Err: fmt.Errorf("stop job %s with a savepoint: %w", id, err)}
		}
		return lifecycle.Result{Path: resp.GetExternalPath()}
	case lifecycle.TriggerSavepoint:
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		resp, err := m.api.TriggerSavepoint(ctx, &weirv1.TriggerSavepointRequest{JobId: id})
		if err != nil {
			return lifecycle.Result{Err: fmt.Errorf("savepoint of job %s: %w", id, err)}
		}
		return lifecycle.Result{Path: resp.GetExternalPath()}
	case lifecycle.Cancel, lifecycle.CancelKeepingState:
		if err := m.cancel(ctx, id); err != nil {
			return lifecycle.Result{Err: err}
		}
		if a.Kind == lifecycle.Cancel {
			return lifecycle.Result{}
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cps, err := m.api.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: id})
		if err != nil {
			return lifecycle.Result{Err: fmt.Errorf("checkpoints of cancelled job %s: %w", id, err)}
		}
		n := newest(cps)
		return lifecycle.Result{Path: n.path, Savepoint: n.savepoint}
	}
	return lifecycle.Result{}
}

// cancel cancels job id and waits until it is in a terminal state, so
// that its latest checkpoint is final.
func (m *jobManager) cancel(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := m.api.CancelJob(ctx, &weirv1.CancelJobRequest{JobId: id}); err != nil && status.Code(err) != codes.FailedPrecondition {
		return fmt.Errorf("cancel job %s: %w", id, err)
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		resp, err := m.api.GetJob(ctx, &weirv1.GetJobRequest{JobId: id})
		if err == nil {
			switch resp.GetJob().GetState() {
			case weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_FINISHED:
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s did not end after its cancellation: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}
