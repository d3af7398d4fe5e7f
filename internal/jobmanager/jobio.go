package jobmanager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
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
	// The whole job ID: jobs share a target, and an abort discards its
	// savepoint's directory, which must never be another job's.
	dir := blob.Join(target, fmt.Sprintf("savepoint-%s-%d", s.j.id, id))
	if err := (storage.Files{}).MkdirAll(dir); err != nil {
		return "", fmt.Errorf("jobmanager: savepoint directory: %w", err)
	}
	return dir, nil
}

func (jobStorage) ReserveMetadata(_ context.Context, dir string) error {
	return storage.ReserveMetadata(dir)
}

func (jobStorage) WriteMetadata(_ context.Context, dir string, md *weirv1.CheckpointMetadata, reserved bool) (string, error) {
	if reserved {
		return storage.WriteReservedMetadata(dir, md)
	}
	return storage.WriteMetadata(dir, md)
}

func (jobStorage) Discard(_ context.Context, dir string) error { return storage.Discard(dir) }

func (jobStorage) DiscardShared(_ context.Context, paths []string) error {
	var errs []error
	for _, p := range paths {
		errs = append(errs, storage.Delete(p))
	}
	return errors.Join(errs...)
}

func (jobStorage) DiscardStates(_ context.Context, states []*weirv1.SubtaskState) error {
	var errs []error
	for _, st := range states {
		errs = append(errs, storage.DiscardHandles(st))
	}
	return errors.Join(errs...)
}

// taskGateway reaches a job's subtasks on their TaskManagers: one request
// per TaskManager for all of a call's subtasks there, sent concurrently.
type taskGateway struct{ j *jobMaster }

// perTaskManager groups attempts by the TaskManager running them; an
// attempt the job does not run (any more) is an error for that attempt
// alone.
func (g taskGateway) perTaskManager(as []*weirv1.ExecutionAttemptID) (map[*taskManager][]*weirv1.ExecutionAttemptID, []error) {
	v := g.j.current()
	where := make(map[string]string, len(v.Execs))
	for _, e := range v.Execs {
		where[e.Attempt.Key()] = e.TaskManager
	}
	groups := map[*taskManager][]*weirv1.ExecutionAttemptID{}
	var errs []error
	for _, a := range as {
		tm := v.tms[where[a.Key()]]
		if tm == nil {
			errs = append(errs, fmt.Errorf("jobmanager: unknown subtask attempt %s", a.Key()))
			continue
		}
		groups[tm] = append(groups[tm], a)
	}
	return groups, errs
}

// fanOut calls send once per TaskManager of as, concurrently, and joins
// the errors, naming the subtasks a TaskManager did not run.
func (g taskGateway) fanOut(ctx context.Context, as []*weirv1.ExecutionAttemptID,
	send func(ctx context.Context, c weirv1grpc.TaskExecutorServiceClient, batch []*weirv1.ExecutionAttemptID) ([]*weirv1.ExecutionAttemptID, error)) error {
	groups, errs := g.perTaskManager(as)
	ctx, cancel := context.WithTimeout(ctx, g.j.s.cfg.RPCTimeout)
	defer cancel()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for tm, batch := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unknown, err := send(ctx, tm.client, batch)
			if err == nil && len(unknown) > 0 {
				keys := make([]string, len(unknown))
				for i, a := range unknown {
					keys[i] = a.Key()
				}
				err = fmt.Errorf("not running there: %s", strings.Join(keys, ", "))
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("jobmanager: TaskManager %s: %w", tm.id, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (g taskGateway) TriggerCheckpoint(ctx context.Context, as []*weirv1.ExecutionAttemptID, id int64, ts time.Time, opts *weirv1.CheckpointOptions) error {
	return g.fanOut(ctx, as, func(ctx context.Context, c weirv1grpc.TaskExecutorServiceClient, batch []*weirv1.ExecutionAttemptID) ([]*weirv1.ExecutionAttemptID, error) {
		resp, err := c.TriggerCheckpoint(ctx, &weirv1.TriggerCheckpointOnTaskRequest{Attempts: batch, CheckpointId: id, TimestampMs: ts.UnixMilli(), Options: opts})
		return resp.GetUnknown(), err
	})
}

func (g taskGateway) NotifyCheckpointComplete(ctx context.Context, as []*weirv1.ExecutionAttemptID, id, lastSubsumed int64, final bool) error {
	return g.fanOut(ctx, as, func(ctx context.Context, c weirv1grpc.TaskExecutorServiceClient, batch []*weirv1.ExecutionAttemptID) ([]*weirv1.ExecutionAttemptID, error) {
		resp, err := c.NotifyCheckpointComplete(ctx, &weirv1.NotifyCheckpointCompleteRequest{Attempts: batch, CheckpointId: id, LastSubsumedId: lastSubsumed, Final: final})
		return resp.GetUnknown(), err
	})
}

func (g taskGateway) NotifyCheckpointAborted(ctx context.Context, as []*weirv1.ExecutionAttemptID, id int64) error {
	return g.fanOut(ctx, as, func(ctx context.Context, c weirv1grpc.TaskExecutorServiceClient, batch []*weirv1.ExecutionAttemptID) ([]*weirv1.ExecutionAttemptID, error) {
		resp, err := c.NotifyCheckpointAborted(ctx, &weirv1.NotifyCheckpointAbortedRequest{Attempts: batch, CheckpointId: id})
		return resp.GetUnknown(), err
	})
}
