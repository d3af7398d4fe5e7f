package jobmanager

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// peerIdentity names the caller by its verified client certificate: the
// subject's common name, else its first DNS name. It is "" without mutual
// TLS, where callers cannot be told apart.
func peerIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return ""
	}
	leaf := info.State.VerifiedChains[0][0]
	if leaf.Subject.CommonName != "" {
		return leaf.Subject.CommonName
	}
	if len(leaf.DNSNames) > 0 {
		return leaf.DNSNames[0]
	}
	return ""
}

// checkSender refuses, with mutual TLS on, a report about attempt a from a
// caller whose certificate is not the one of the TaskManager a was
// deployed to: a TaskManager speaks only for its own subtasks, so a
// compromised one cannot complete or fail another's checkpoint. An
// attempt the job does not run (any more) is let through: the
// coordinator drops what it does not know.
func (s *Server) checkSender(ctx context.Context, j *jobMaster, a *weirv1.ExecutionAttemptID, what string) error {
	if s.cfg.TLS == nil {
		return nil
	}
	v := j.current()
	for _, e := range v.Execs {
		if !scheduler.SameAttempt(e.Attempt, a) {
			continue
		}
		tm := v.tms[e.TaskManager]
		caller := peerIdentity(ctx)
		if tm == nil {
			// Not placed: an attempt a new leader waits to adopt speaks
			// only with the certificate recorded with it.
			if want, ok := j.adoptIdentity[a.Key()]; ok && want != caller {
				s.foreignReports.WithLabelValues(what).Inc()
				return status.Errorf(codes.PermissionDenied, "jobmanager: %s of subtask attempt %s: the caller %q is not the TaskManager it was deployed to", what, a.Key(), caller)
			}
			return nil
		}
		if caller == tm.identity {
			return nil
		}
		s.foreignReports.WithLabelValues(what).Inc()
		key := a.Key()
		s.log.Warn("report from another TaskManager refused", "report", what, "attempt", key,
			"taskmanager_id", tm.id, "taskmanager_identity", tm.identity, "caller_identity", caller)
		return status.Errorf(codes.PermissionDenied, "jobmanager: %s of subtask attempt %s: the caller %q is not TaskManager %s", what, key, caller, tm.id)
	}
	return nil
}
