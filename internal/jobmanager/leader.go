package jobmanager

import (
	"context"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/storage"
)

// leaderOnly refuses the client API and the TaskManager gateway on a
// JobManager that does not lead: callers find the leader through the HA
// store (etcd or the Kubernetes Lease).
func (s *Server) leaderOnly(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	client := strings.HasPrefix(info.FullMethod, "/weir.v1.ClientService/")
	switch {
	case !s.leading.Load() && (client || strings.HasPrefix(info.FullMethod, "/weir.v1.JobManagerGatewayService/")):
		return nil, status.Error(codes.Unavailable, "jobmanager: not the leader; find the leader through the HA store (etcd, or the Kubernetes Lease)")
	case !s.recovered.Load() && info.FullMethod == registerMethod:
		// A TaskManager registers once the jobs are known: what it reports
		// running is adopted by them, or cancelled. Its registration waits
		// for them rather than retrying later.
		if err := s.awaitRecovery(ctx); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			// The TaskManager gave up on this call and registers again: a
			// registration it never heard of would count as a second one.
			return nil, status.Error(codes.Unavailable, "jobmanager: the new leader recovered the stored jobs too late for this call; try again")
		}
	case !s.recovered.Load() && (client || strings.HasPrefix(info.FullMethod, "/weir.v1.JobManagerGatewayService/")):
		// The TaskManagers' other calls (state reports, acks) wait for the
		// jobs too: a report of a job not recovered yet would be refused
		// for good.
		return nil, status.Error(codes.Unavailable, "jobmanager: the new leader is still recovering the stored jobs; try again")
	}
	return handler(ctx, req)
}

const registerMethod = "/weir.v1.JobManagerGatewayService/RegisterTaskManager"

// awaitRecovery waits until this leadership recovered its jobs, or ctx
// ends.
func (s *Server) awaitRecovery(ctx context.Context) error {
	s.mu.Lock()
	ch := s.mu.recoveredCh
	s.mu.Unlock()
	if ch == nil {
		return status.Error(codes.Unavailable, "jobmanager: not the leader")
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return status.Error(codes.Unavailable, "jobmanager: the new leader is still recovering the stored jobs; try again")
	}
}

// services returns the current leadership's HA services.
func (s *Server) services() (haServices, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.services == nil {
		return nil, status.Error(codes.Unavailable, "jobmanager: not the leader")
	}
	return s.mu.services, nil
}

// lead campaigns for leadership until ctx ends; each term recovers every
// job from the HA store, and a lost term steps down before campaigning
// again.
func (s *Server) lead(ctx context.Context, info ha.LeaderInfo) {
	elector, err := s.newElector()
	if err != nil {
		s.log.Error("leader election unavailable", "err", err)
		return
	}
	defer elector.close()
	for ctx.Err() == nil {
		s.log.Info("campaigning for leadership", "rpc_addr", info.RPCAddr, "ha", s.cfg.HA)
		l, err := elector.campaign(ctx, info)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("campaign failed; retrying", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second): // a pause before campaigning again
				}
			}
			continue
		}
		s.becomeLeader(ctx, l)
		select {
		case <-l.Done():
			s.log.Error("leadership lost; stepping down", "err", l.Err())
			s.stepDown()
		case <-ctx.Done():
			s.stepDown()
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = l.Resign(rctx)
			cancel()
			return
		}
	}
}

// becomeLeader takes over: every job in the job store is recovered and
// redeployed from its latest completed checkpoint once TaskManagers
// register.
func (s *Server) becomeLeader(ctx context.Context, l leadership) {
	services, err := l.services()
	if err != nil {
		s.log.Error("HA services unavailable", "err", err)
		return
	}
	start := time.Now()
	recovered := make(chan struct{})
	s.mu.Lock()
	s.mu.services = services
	s.mu.recoveredCh = recovered
	s.mu.Unlock()
	s.leading.Store(true)
	s.leader.Set(1)
	s.log.Info("elected leader", "fence", l.fence())
	jobs, err := services.jobs(ctx)
	for err != nil {
		// Until the stored jobs are known the client API stays refused:
		// try again while this leadership lasts.
		s.log.Error("reading the stored jobs failed; trying again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-l.Done():
			return
		case <-time.After(time.Second):
		}
		jobs, err = services.jobs(ctx)
	}
	unrecovered := map[string]*weirv1.JobGraph{}
	for id, sj := range jobs {
		err := sj.err
		if err == nil {
			err = s.recoverJob(ctx, services, id, sj)
		}
		if err != nil {
			s.log.Error("recovering job failed; it stays stored for the next leader", "job_id", id, "err", err)
			unrecovered[id] = sj.graph // nil when it does not decode
		}
	}
	s.mu.Lock()
	s.mu.unrecovered = unrecovered
	s.mu.Unlock()
	s.recovered.Store(true)
	close(recovered)
	for _, j := range s.jobsSorted() {
		j.post(j.sm.StartAdoption)
	}
	s.log.Info("jobs recovered", "jobs", len(jobs), "took", time.Since(start))
	s.scheduleWaiting()
}

// recoverJob rebuilds one stored job, starting from the newest readable
// checkpoint in its store (an unreadable newest one is skipped for the one
// before it).
func (s *Server) recoverJob(ctx context.Context, services haServices, id string, sj storedJob) error {
	g := sj.graph
	// Where the job first started matters only while it has no
	// checkpoint of its own: a savepoint deleted since must not keep a
	// job with newer checkpoints from being recovered.
	var origin *restorePoint
	var originErr error
	if g.GetRestoreFrom() != "" {
		origin, originErr = loadRestorePoint(g)
	}
	_, store, err := services.jobServices(id, int(g.GetCheckpointing().GetRetained()))
	if err != nil {
		return err
	}
	kept, skipped, err := store.RecoverReport(ctx, func(cp checkpoint.Completed) error {
		_, err := storage.ReadMetadata(cp.MetadataPath)
		return err
	})
	if err != nil {
		return err
	}
	for _, sk := range skipped {
		s.log.Error("skipping unreadable checkpoint on recovery", "job_id", id, "checkpoint_id", sk.ID, "err", sk.Err)
	}
	if originErr != nil {
		if len(kept) == 0 {
			return originErr
		}
		s.log.Warn("the savepoint the job first started from is unreadable; it has checkpoints of its own", "job_id", id, "err", originErr)
	}
	start := origin
	if len(kept) > 0 {
		newest := kept[len(kept)-1]
		md, err := storage.ReadMetadata(newest.MetadataPath)
		if err != nil {
			return err
		}
		start = newRestorePoint(newest.MetadataPath, md)
	}
	var adopt *scheduler.Adoption
	if len(sj.status.Attempts) > 0 {
		// The TaskManagers register with this leader once it recovered
		// every job; one that does not within the heartbeat timeout would
		// be declared lost anyway.
		adopt = &scheduler.Adoption{Attempts: sj.status.attempts(id), Window: s.cfg.HeartbeatTimeout}
	}
	j, err := s.newJob(services, id, g, origin, start, sj.status, adopt)
	if err != nil {
		return err
	}
	// The counter starts where the job's count is, so that it agrees with
	// the REST API on this leader.
	s.restarts.WithLabelValues(id, g.GetName()).Add(float64(sj.status.Restarts))
	s.mu.Lock()
	s.mu.jobs[id] = j
	s.mu.Unlock()
	from := "no checkpoint"
	if start != nil {
		from = start.path
	}
	j.log.Info("job recovered", "from", from)
	return nil
}

// stepDown stops everything a lost leadership ran: coordinators close (no
// further writes are attempted), jobs and TaskManagers are forgotten; the
// new leader recovers the jobs and the TaskManagers follow it.
func (s *Server) stepDown() {
	s.leading.Store(false)
	s.recovered.Store(false)
	s.leader.Set(0)
	s.mu.Lock()
	jobs := s.mu.jobs
	tms := s.mu.tms.Clear()
	s.mu.jobs, s.mu.services, s.mu.unrecovered, s.mu.recoveredCh = map[string]*jobMaster{}, nil, nil, nil
	s.tmGauge.Set(0)
	s.mu.Unlock()
	for _, j := range jobs {
		j.suspend()
		j.stop()
	}
	for _, m := range tms {
		m.Data.conn.Close()
	}
}
