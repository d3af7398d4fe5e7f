package jobmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// jobIO is the coordinator's I/O for one job: the counter, checkpoint
// storage, the completed-checkpoint store and the TaskManagers.
type jobIO struct{ j *jobMaster }

func (io *jobIO) NextCheckpointID(ctx context.Context) (int64, error) {
	return io.j.counter.Next(ctx)
}

func (io *jobIO) InitLocation(_ context.Context, id int64, savepoint bool, target string) (string, error) {
	if !savepoint {
		return io.j.s.storage.InitLocation(io.j.id, id)
	}
	if target == "" {
		target = filepath.Join(io.j.s.cfg.CheckpointDir, "savepoints")
	}
	dir := filepath.Join(target, fmt.Sprintf("savepoint-%s-%d", io.j.id[:6], id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("jobmanager: savepoint directory: %w", err)
	}
	return dir, nil
}

func (io *jobIO) client(a *weirv1.ExecutionAttemptID) (weirv1.TaskExecutorServiceClient, error) {
	io.j.mu.Lock()
	e := io.j.findLocked(a)
	io.j.mu.Unlock()
	if e == nil {
		return nil, fmt.Errorf("jobmanager: unknown subtask attempt %v", a)
	}
	return e.tm.client, nil
}

func (io *jobIO) rpcCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, io.j.s.cfg.RPCTimeout)
}

func (io *jobIO) TriggerCheckpoint(ctx context.Context, a *weirv1.ExecutionAttemptID, id int64, ts time.Time, opts *weirv1.CheckpointOptions) error {
	c, err := io.client(a)
	if err != nil {
		return err
	}
	ctx, cancel := io.rpcCtx(ctx)
	defer cancel()
	_, err = c.TriggerCheckpoint(ctx, &weirv1.TriggerCheckpointOnTaskRequest{Attempt: a, CheckpointId: id, TimestampMs: ts.UnixMilli(), Options: opts})
	return err
}

func (io *jobIO) NotifyCheckpointComplete(ctx context.Context, a *weirv1.ExecutionAttemptID, id, lastSubsumed int64) error {
	c, err := io.client(a)
	if err != nil {
		return err
	}
	ctx, cancel := io.rpcCtx(ctx)
	defer cancel()
	_, err = c.NotifyCheckpointComplete(ctx, &weirv1.NotifyCheckpointCompleteRequest{Attempt: a, CheckpointId: id, LastSubsumedId: lastSubsumed})
	return err
}

func (io *jobIO) NotifyCheckpointAborted(ctx context.Context, a *weirv1.ExecutionAttemptID, id int64) error {
	c, err := io.client(a)
	if err != nil {
		return err
	}
	ctx, cancel := io.rpcCtx(ctx)
	defer cancel()
	_, err = c.NotifyCheckpointAborted(ctx, &weirv1.NotifyCheckpointAbortedRequest{Attempt: a, CheckpointId: id})
	return err
}

func (io *jobIO) Finalize(ctx context.Context, f coordinator.Finalize) (string, int64, error) {
	path, err := storage.WriteMetadata(f.Location, f.Metadata)
	if err != nil || f.Savepoint {
		// Savepoints belong to the user: never in the store, never discarded.
		return path, 0, err
	}
	subsumed, err := io.j.store.Add(ctx, ha.CompletedCheckpoint{ID: f.ID, MetadataPath: path, Dir: f.Location})
	if err != nil {
		return "", 0, fmt.Errorf("jobmanager: add checkpoint %d to the store: %w", f.ID, err)
	}
	var newest int64
	var errs []error
	for _, c := range subsumed {
		newest = max(newest, c.ID)
		errs = append(errs, storage.Discard(c.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		io.j.log.Warn("discarding subsumed checkpoints failed", "err", err)
	}
	return path, newest, nil
}

func (io *jobIO) Discard(_ context.Context, d coordinator.DiscardState) error {
	var errs []error
	if d.Location != "" {
		errs = append(errs, storage.Discard(d.Location))
	}
	for _, st := range d.States {
		errs = append(errs, storage.DiscardHandles(st))
	}
	return errors.Join(errs...)
}

func (io *jobIO) FailJob(cause error) {
	go io.j.fail(cause.Error())
}
