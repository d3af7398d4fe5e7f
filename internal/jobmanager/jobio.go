package jobmanager

import (
	"context"
	"errors"
	"fmt"

	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// jobStorage is checkpoint storage for one job, as the coordinator uses it.
type jobStorage struct{ j *jobMaster }

func (s jobStorage) InitLocation(_ context.Context, id int64, savepoint bool, target string) (string, error) {
	if !savepoint {
		return s.j.s.storage.InitLocation(s.j.id, id)
	}
	if target == "" {
		target = blob.Join(s.j.s.cfg.CheckpointDir, "savepoints")
	}
	dir := blob.Join(target, fmt.Sprintf("savepoint-%s-%d", s.j.id[:6], id))
	if err := (storage.Files{}).MkdirAll(dir); err != nil {
		return "", fmt.Errorf("jobmanager: savepoint directory: %w", err)
	}
	return dir, nil
}

func (jobStorage) WriteMetadata(_ context.Context, dir string, md *weirv1.CheckpointMetadata) (string, error) {
	return storage.WriteMetadata(dir, md)
}

func (jobStorage) Discard(_ context.Context, dir string) error { return storage.Discard(dir) }

func (jobStorage) DiscardStates(_ context.Context, states []*weirv1.SubtaskState) error {
	var errs []error
	for _, st := range states {
		errs = append(errs, storage.DiscardHandles(st))
	}
	return errors.Join(errs...)
}

// taskGateway reaches a job's subtasks on their TaskManagers.
type taskGateway struct{ j *jobMaster }

func (g taskGateway) client(a *weirv1.ExecutionAttemptID) (weirv1.TaskExecutorServiceClient, error) {
	v := g.j.current()
	for _, e := range v.Execs {
		if scheduler.SameAttempt(e.Attempt, a) {
			if tm := v.tms[e.TaskManager]; tm != nil {
				return tm.client, nil
			}
		}
	}
	return nil, fmt.Errorf("jobmanager: unknown subtask attempt %s/%d/%d", a.GetVertex(), a.GetSubtaskIndex(), a.GetAttempt())
}

func (g taskGateway) rpcCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.j.s.cfg.RPCTimeout)
}

func (g taskGateway) TriggerCheckpoint(ctx context.Context, a *weirv1.ExecutionAttemptID, id int64, ts time.Time, opts *weirv1.CheckpointOptions) error {
	c, err := g.client(a)
	if err != nil {
		return err
	}
	ctx, cancel := g.rpcCtx(ctx)
	defer cancel()
	_, err = c.TriggerCheckpoint(ctx, &weirv1.TriggerCheckpointOnTaskRequest{Attempt: a, CheckpointId: id, TimestampMs: ts.UnixMilli(), Options: opts})
	return err
}

func (g taskGateway) NotifyCheckpointComplete(ctx context.Context, a *weirv1.ExecutionAttemptID, id, lastSubsumed int64, final bool) error {
	c, err := g.client(a)
	if err != nil {
		return err
	}
	ctx, cancel := g.rpcCtx(ctx)
	defer cancel()
	_, err = c.NotifyCheckpointComplete(ctx, &weirv1.NotifyCheckpointCompleteRequest{Attempt: a, CheckpointId: id, LastSubsumedId: lastSubsumed, Final: final})
	return err
}

func (g taskGateway) NotifyCheckpointAborted(ctx context.Context, a *weirv1.ExecutionAttemptID, id int64) error {
	c, err := g.client(a)
	if err != nil {
		return err
	}
	ctx, cancel := g.rpcCtx(ctx)
	defer cancel()
	_, err = c.NotifyCheckpointAborted(ctx, &weirv1.NotifyCheckpointAbortedRequest{Attempt: a, CheckpointId: id})
	return err
}
