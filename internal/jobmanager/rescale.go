package jobmanager

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/rpcpolicy"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/storedgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// RescaleJob takes a checkpoint of a running job, restarts it
// from that checkpoint at its new parallelisms and stores the job so: the
// same path as a failover, so sinks abort what the checkpoint does not
// cover and nothing is lost or duplicated.
func (s *Server) RescaleJob(ctx context.Context, req *weirv1.RescaleJobRequest) (*weirv1.RescaleJobResponse, error) {
	j, err := s.runningJob(req.GetJobId())
	if err != nil {
		return nil, err
	}
	id, err := s.rescale(ctx, j, req.GetParallelism(), nil)
	if err != nil {
		return nil, err
	}
	return &weirv1.RescaleJobResponse{CheckpointId: id}, nil
}

// rescale rescales j to parallelism (vertex names to their new
// parallelism), storing the graph edit changed too, and returns the
// checkpoint it restarts from. edit, under the lock that orders the
// changes of the graph, may refuse the rescale with an error.
func (s *Server) rescale(ctx context.Context, j *jobMaster, parallelism map[string]int32, edit func(*weirv1.JobGraph) error) (int64, error) {
	// One change of the stored graph at a time: two would each store
	// their own copy, and the later would undo the earlier.
	if err := j.reconfig.LockContext(ctx, j.ctx); err != nil {
		return 0, err
	}
	defer j.reconfig.Unlock()
	// Its retries end with the job master too (a lost leadership).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(j.ctx, cancel)()
	if len(parallelism) == 0 {
		return 0, status.Error(codes.InvalidArgument, "jobmanager: rescale: name at least one vertex and its new parallelism")
	}
	g := proto.Clone(j.current().Graph).(*weirv1.JobGraph)
	if edit != nil {
		if err := edit(g); err != nil {
			return 0, status.Errorf(codes.FailedPrecondition, "jobmanager: rescale: %v", err)
		}
	}
	names := make([]string, 0, len(parallelism))
	for name := range parallelism {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := parallelism[name]
		var v *weirv1.JobVertex
		for _, x := range g.GetVertices() {
			if x.GetName() == name {
				v = x
			}
		}
		if v == nil {
			return 0, status.Errorf(codes.InvalidArgument, "jobmanager: rescale: job %s has no vertex %q (it has %s)", j.id, name, vertexNames(g))
		}
		if p < 1 || p > g.GetMaxParallelism() {
			return 0, status.Errorf(codes.InvalidArgument, "jobmanager: rescale: vertex %q: parallelism %d is outside 1..%d (the job's max-parallelism)", name, p, g.GetMaxParallelism())
		}
		v.Parallelism = p
	}
	if err := jobgraph.Validate(g); err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "jobmanager: rescale: %v", err)
	}
	if need, have := scheduler.SlotsNeeded(g), s.slotsFor(j); need > have {
		held := total(j.current().held)
		return 0, status.Errorf(codes.FailedPrecondition, "jobmanager: rescale: job %s would need %d slots; it holds %d and %d more are free", j.id, need, held, have-held)
	}
	// The last checkpoint before the restart (the coordinator pauses
	// periodic ones). Unaligned if the job's are, its in-flight records
	// redistributed at the restore, unless the job has a broadcast edge.
	// Awaited whatever becomes of the client's call: once it completes,
	// the coordinator takes no other checkpoint until the rescale's
	// restart or its refusal, one of which follows here.
	r := j.coord.Trigger(context.WithoutCancel(ctx), coordinator.RescaleCheckpoint, "")
	if err := triggerError(j.id, r); err != nil {
		return 0, err
	}
	services, err := s.services()
	if err != nil {
		j.coord.ResumePeriodic()
		return 0, err
	}
	// Stored once the scheduler took it (a graph stored for a rescale it
	// refused would be recovered by the next leader): a new leader then
	// recovers the job at its new shape from the checkpoint, which
	// restores at any parallelism. Until the store has it, a new leader
	// would restore the job's checkpoints at the old parallelism: they
	// are aligned meanwhile if the job has a broadcast edge.
	change := j.graphs.Begin()
	j.alignWhileLagging(g)
	if err := j.rescale(g); err != nil {
		j.graphs.Abandon(change)
		j.alignWhileLagging(g)
		j.coord.ResumePeriodic()
		return 0, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err := putJobRetrying(ctx, services, j.id, g); err != nil {
		j.log.Error("rescale under way but not stored yet: storing it is retried; until then a new leader would run the job at its previous parallelism", "err", err)
		j.goIO(func() { j.storeLater(services, g, change) })
		return 0, status.Errorf(codes.Unavailable, "jobmanager: rescale of job %s is under way but not stored yet (retried until the store answers; until then a new leader would restore the previous parallelism): %v", j.id, err)
	}
	j.graphs.Stored(change)
	j.alignWhileLagging(g)
	j.log.Info("job rescaling", "checkpoint_id", r.ID, "parallelism", parallelism)
	return r.ID, nil
}

// reconfigLock is a mutex whose waiters can give up: a rescale the
// autoscaler carries out must not hold up the job master's stop behind a
// client's rescale that holds it. The zero value is unlocked.
type reconfigLock struct {
	once sync.Once
	ch   chan struct{}
}

func (l *reconfigLock) sem() chan struct{} {
	l.once.Do(func() { l.ch = make(chan struct{}, 1) })
	return l.ch
}

// Lock waits for the lock.
func (l *reconfigLock) Lock() { l.sem() <- struct{}{} }

// LockContext waits for the lock until ctx or stop ends.
func (l *reconfigLock) LockContext(ctx, stop context.Context) error {
	select {
	case l.sem() <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop.Done():
		return status.Error(codes.Unavailable, "jobmanager: the job is no longer managed here")
	}
}

func (l *reconfigLock) Unlock() { <-l.sem() }

// storeLater stores g, a change of the graph the job already made, until
// the store takes it, a later change was stored or the job's HA data
// removed (change is no longer the latest), the job ended, or this
// JobManager stops running the job (it lost leadership: the new leader
// recovers the graph last stored, from the newest stored checkpoint).
func (j *jobMaster) storeLater(services haServices, g *weirv1.JobGraph, change storedgraph.Change) {
	backoff := rpcpolicy.Backoff{First: 500 * time.Millisecond, Max: 10 * time.Second}
	for {
		select {
		case <-j.ctx.Done():
			return
		case <-time.After(backoff.Next()):
		}
		if j.reconfig.LockContext(j.ctx, j.ctx) != nil {
			return
		}
		if !j.graphs.Retry(change) || j.isClosed() {
			// Stored again meanwhile, or the job ended: storing it now
			// would bring an ended job back at the next leader.
			j.reconfig.Unlock()
			j.log.Info("rescaled job no longer stored: a later change was stored, or the job ended")
			return
		}
		ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
		err := services.putJob(ctx, j.id, g)
		cancel()
		if err == nil {
			j.graphs.Stored(change)
			j.alignWhileLagging(g)
		}
		j.reconfig.Unlock()
		if err == nil {
			j.log.Info("rescaled job stored", "parallelism", parallelisms(g))
			return
		}
		j.log.Warn("storing the rescaled job failed; retrying", "err", err)
	}
}

// alignWhileLagging makes the job's checkpoints aligned while the HA
// store lacks a change of its graph, if it has a broadcast edge (see
// storedgraph); the job's own mode otherwise. Called under reconfig.
func (j *jobMaster) alignWhileLagging(g *weirv1.JobGraph) {
	if !jobgraph.HasBroadcastEdge(g) {
		return
	}
	aligned := j.graphs.Lagging()
	j.coord.Reconfigure(coordinator.Reconfiguration{Aligned: &aligned})
}

func parallelisms(g *weirv1.JobGraph) map[string]int32 {
	out := map[string]int32{}
	for _, v := range g.GetVertices() {
		out[v.GetName()] = v.GetParallelism()
	}
	return out
}

// putJobRetrying stores g, trying again while the store is unavailable
// and ctx allows: the change it records already took effect.
func putJobRetrying(ctx context.Context, services haServices, id string, g *weirv1.JobGraph) error {
	pause := 100 * time.Millisecond
	for {
		err := services.putJob(ctx, id, g)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

func vertexNames(g *weirv1.JobGraph) string {
	var names []string
	for _, v := range g.GetVertices() {
		names = append(names, fmt.Sprintf("%q", v.GetName()))
	}
	return strings.Join(names, ", ")
}

// slotsFor is how many slots job j could hold: those it holds and those
// free in the cluster.
func (s *Server) slotsFor(j *jobMaster) int {
	return len(s.freeSlots()) + total(j.current().held)
}

func total(held map[string]int) int {
	n := 0
	for _, c := range held {
		n += c
	}
	return n
}

func (j *jobMaster) rescale(g *weirv1.JobGraph) error {
	err := fmt.Errorf("jobmanager: job %s is no longer managed here", j.id)
	j.call(func() { err = j.sm.Rescale(g) })
	return err
}

// ConfigureCheckpointing changes a running job's periodic checkpointing in
// place: stored with the job first, so that a new leader keeps it, then
// applied to the running coordinator.
func (s *Server) ConfigureCheckpointing(ctx context.Context, req *weirv1.ConfigureCheckpointingRequest) (*weirv1.ConfigureCheckpointingResponse, error) {
	j, err := s.runningJob(req.GetJobId())
	if err != nil {
		return nil, err
	}
	if err := j.reconfig.LockContext(ctx, j.ctx); err != nil {
		return nil, err
	}
	defer j.reconfig.Unlock()
	var r coordinator.Reconfiguration
	g := proto.Clone(j.current().Graph).(*weirv1.JobGraph)
	cp := g.GetCheckpointing()
	if cp == nil {
		cp = &weirv1.CheckpointConfig{}
		g.Checkpointing = cp
	}
	if d := req.GetInterval(); d != nil {
		v := d.AsDuration()
		r.Interval, cp.Interval = &v, d
	}
	if d := req.GetTimeout(); d != nil {
		v := d.AsDuration()
		r.Timeout, cp.Timeout = &v, d
	}
	if d := req.GetMinPause(); d != nil {
		v := d.AsDuration()
		r.MinPause, cp.MinPause = &v, d
	}
	if d := req.GetIntervalDuringBacklog(); d != nil {
		v := d.AsDuration()
		r.IntervalDuringBacklog, cp.IntervalDuringBacklog = &v, d
	}
	if r == (coordinator.Reconfiguration{}) {
		return nil, status.Error(codes.InvalidArgument, "jobmanager: configure checkpointing: set at least one of interval, timeout, min-pause, interval-during-backlog")
	}
	if err := jobgraph.Validate(g); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "jobmanager: configure checkpointing: %v", err)
	}
	services, err := s.services()
	if err != nil {
		return nil, err
	}
	if err := services.putJob(ctx, j.id, g); err != nil {
		return nil, status.Errorf(codes.Unavailable, "jobmanager: configure checkpointing: store job: %v", err)
	}
	j.graphs.StoredCurrent() // it holds any rescale being stored in the background
	j.alignWhileLagging(g)
	ok := false
	j.call(func() { ok = j.sm.UpdateCheckpointing(cp) })
	if !ok || !j.coord.Reconfigure(r) {
		return nil, status.Errorf(codes.FailedPrecondition, "jobmanager: job %s is no longer running", j.id)
	}
	j.log.Info("checkpointing reconfigured", "interval", cp.GetInterval().AsDuration(), "timeout", cp.GetTimeout().AsDuration(), "min_pause", cp.GetMinPause().AsDuration())
	return &weirv1.ConfigureCheckpointingResponse{Checkpointing: cp}, nil
}
