package checkpointing

// Driver tests of the paths where a completed checkpoint could be lost or
// its output committed twice: an ambiguous store write, a failover racing a
// finalization, stop-with-savepoint followed by a failure, and deletions
// that fall behind.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/coordinator"

	"github.com/weirproject/weir/internal/checkpoint"

	"github.com/weirproject/weir/internal/ha"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// timeoutStore applies Add to the real store, then, for the IDs in lose,
// reports what a client sees when etcd applied the transaction but the
// answer was lost: a deadline error.
type timeoutStore struct {
	*ha.StandaloneStore
	lose map[int64]bool
}

func (s *timeoutStore) Add(ctx context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error) {
	subsumed, err := s.StandaloneStore.Add(ctx, cp)
	if err == nil && s.lose[cp.ID] {
		return nil, fmt.Errorf("ha: checkpoint store: add checkpoint %d: %w: etcd txn: %w", cp.ID, checkpoint.ErrOutcomeUnknown, context.DeadlineExceeded)
	}
	return subsumed, err
}

// TestDriverUnknownStoreOutcomeKeepsFiles: the store write of checkpoint 2
// timed out although it was applied (and subsumed 1). The checkpoint the
// store now names must stay restorable: its files are kept, no task is told
// to roll it back, and the job fails over to recover from the store.
func TestDriverUnknownStoreOutcomeKeepsFiles(t *testing.T) {
	store := &timeoutStore{StandaloneStore: ha.NewStandaloneStore(1), lose: map[int64]bool{2: true}}
	e := newDriverEnv(t, testConfig(), nil, func(d *Deps) { d.Store = store })
	e.d.Start(e.tasks)

	first := e.trigger(coordinator.Manual, "")
	e.triggered(1, "CHECKPOINT")
	e.ackAll(1, e.chk(1))
	if r := waitResult(t, first); r.Err != nil {
		t.Fatal(r.Err)
	}
	second := e.trigger(coordinator.Manual, "")
	e.triggered(2, "CHECKPOINT")
	e.ackAll(2, e.chk(2))
	wantFailure(t, waitResult(t, second), weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_FINALIZE_CHECKPOINT_FAILURE)
	e.rec.waitFor(t, "fail-job coordinator: checkpoint 2: coordinator: checkpoint failed: CHECKPOINT_FAILURE_REASON_FINALIZE_CHECKPOINT_FAILURE: outcome unknown, its files are kept: coordinator: add checkpoint 2 to the store: ha: checkpoint store: add checkpoint 2: checkpoint store: outcome of the write unknown: etcd txn: context deadline exceeded")

	// What a recovery reads: the store names 2, which must be whole.
	latest, ok, err := store.Latest(context.Background())
	if err != nil || !ok || latest.ID != 2 {
		t.Fatalf("store latest = %+v %t %v, want checkpoint 2", latest, ok, err)
	}
	e.d.Close() // waits for every discard queued
	for _, task := range e.tasks {
		a := task.Attempt
		path := filepath.Join(e.chk(2), fmt.Sprintf("%s-%d-chk-2.state", a.GetVertex(), a.GetSubtaskIndex()))
		if _, err := os.Stat(path); err != nil {
			t.Errorf("state of the stored checkpoint 2: %v", err)
		}
	}
	if _, err := os.Stat(latest.MetadataPath); err != nil {
		t.Errorf("_metadata of the stored checkpoint 2: %v", err)
	}
	for _, task := range e.tasks {
		if e.rec.has(fmt.Sprintf("aborted %s id=2", fmtAttempt(task.Attempt))) {
			t.Errorf("%s was told to roll checkpoint 2 back", fmtAttempt(task.Attempt))
		}
	}
}

// slowMetadataStorage holds WriteMetadata until released.
type slowMetadataStorage struct {
	*dirStorage
	release chan struct{}
	entered chan struct{}
}

func (s *slowMetadataStorage) WriteMetadata(ctx context.Context, dir string, md *weirv1.CheckpointMetadata, reserved bool) (string, error) {
	close(s.entered)
	<-s.release
	return s.dirStorage.WriteMetadata(ctx, dir, md, reserved)
}

// TestDriverAwaitFinalizationsAfterStop: a failover stops the coordinator
// while checkpoint 1's _metadata is being written. The write still adds 1 to
// the store afterwards, so the failover must not pick its restore point
// before that: AwaitFinalizations returns only once the store holds 1.
func TestDriverAwaitFinalizationsAfterStop(t *testing.T) {
	store := ha.NewStandaloneStore(1)
	var slow *slowMetadataStorage
	e := newDriverEnv(t, testConfig(), nil, func(d *Deps) {
		slow = &slowMetadataStorage{dirStorage: d.Storage.(*dirStorage), release: make(chan struct{}), entered: make(chan struct{})}
		d.Storage, d.Store = slow, store
	})
	e.d.Start(e.tasks)
	res := e.trigger(coordinator.Manual, "")
	e.triggered(1, "CHECKPOINT")
	e.ackAll(1, e.chk(1))
	select {
	case <-slow.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the metadata write never started")
	}
	e.d.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_FAILOVER_REGION)

	awaited := make(chan error, 1)
	go func() { awaited <- e.d.AwaitFinalizations(context.Background()) }()
	select {
	case err := <-awaited:
		t.Fatalf("AwaitFinalizations returned (%v) while checkpoint 1 was still being written", err)
	case <-time.After(50 * time.Millisecond): // a window for a wrong early return, not a wait for a condition
	}
	close(slow.release)
	select {
	case err := <-awaited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("AwaitFinalizations did not return after the write")
	}
	if latest, ok, _ := store.Latest(context.Background()); !ok || latest.ID != 1 {
		t.Fatalf("store after the finalization: %+v %t, want checkpoint 1", latest, ok)
	}
	if r := waitResult(t, res); r.Err != nil {
		t.Fatalf("checkpoint 1: %v", r.Err)
	}

}

// TestDriverStopWithSavepointIsRestorePoint: the sinks commit on a
// stop-with-savepoint, so it enters the store as the newest restore point
// (a failure before the job finished restores from it, not from an older
// checkpoint whose output was committed since), and subsuming it later
// never deletes the user's savepoint.
func TestDriverStopWithSavepointIsRestorePoint(t *testing.T) {
	store := ha.NewStandaloneStore(1)
	e := newDriverEnv(t, testConfig(), nil, func(d *Deps) { d.Store = store })
	e.d.Start(e.tasks)
	first := e.trigger(coordinator.Manual, "")
	e.triggered(1, "CHECKPOINT")
	e.ackAll(1, e.chk(1))
	if r := waitResult(t, first); r.Err != nil {
		t.Fatal(r.Err)
	}

	target := filepath.Join(e.storage.root, "sp")
	res := make(chan Result, 1)
	go func() { res <- e.d.StopWithSavepoint(context.Background(), target, false) }()
	e.triggered(2, "SAVEPOINT_SUSPEND")
	e.ackAll(2, filepath.Join(target, "savepoint-2"))
	r := waitResult(t, res)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	e.notified(2, 1)
	latest, ok, err := store.Latest(context.Background())
	if err != nil || !ok || latest.ID != 2 || !latest.Savepoint || latest.MetadataPath != r.Path {
		t.Fatalf("store latest = %+v %t %v, want savepoint 2 at %s", latest, ok, err, r.Path)
	}
	e.rec.waitFor(t, "discard chk-1") // checkpoint 1 was subsumed

	// The job restarted and a checkpoint subsumes the savepoint: the
	// savepoint's files stay.
	e.d.Start(e.tasks)
	third := e.trigger(coordinator.Manual, "")
	e.triggered(3, "CHECKPOINT")
	e.ackAll(3, e.chk(3))
	if r := waitResult(t, third); r.Err != nil {
		t.Fatal(r.Err)
	}
	e.d.Close()
	if _, err := os.Stat(r.Path); err != nil {
		t.Errorf("savepoint after being subsumed: %v", err)
	}
}

// blockingDiscardStorage holds Discard until released.
type blockingDiscardStorage struct {
	*dirStorage
	release chan struct{}
}

func (s *blockingDiscardStorage) Discard(ctx context.Context, dir string) error {
	<-s.release
	return s.dirStorage.Discard(ctx, dir)
}

// TestDriverWaitsForCleanups: with max-concurrent 1, two checkpoints whose
// files are still being deleted hold the next trigger back until the
// deletions catch up.
func TestDriverWaitsForCleanups(t *testing.T) {
	var st *blockingDiscardStorage
	e := newDriverEnv(t, testConfig(), nil, func(d *Deps) {
		st = &blockingDiscardStorage{dirStorage: d.Storage.(*dirStorage), release: make(chan struct{})}
		d.Storage = st
	})
	e.d.Start(e.tasks)
	for id := int64(1); id <= 3; id++ { // 1 and 2 are subsumed: two deletions
		res := e.trigger(coordinator.Manual, "")
		e.triggered(id, "CHECKPOINT")
		e.ackAll(id, e.chk(id))
		if r := waitResult(t, res); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	held := e.trigger(coordinator.Manual, "")
	// The trigger is decided on the loop: a round trip makes sure it was.
	e.d.call(func() {})
	if e.rec.has("counter call 4") {
		t.Fatal("a checkpoint started while two deletions were in flight")
	}
	close(st.release)
	e.triggered(4, "CHECKPOINT")
	e.ackAll(4, e.chk(4))
	if r := waitResult(t, held); r.Err != nil {
		t.Fatal(r.Err)
	}
}
