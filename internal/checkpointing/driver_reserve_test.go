package checkpointing

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/coordinator"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// heldReservations holds each ReserveMetadata until released, or fails it.
type heldReservations struct {
	*dirStorage
	entered chan string
	release chan struct{}
	once    sync.Once
	err     error
}

func (s *heldReservations) releaseOnce() { s.once.Do(func() { close(s.release) }) }

func (s *heldReservations) ReserveMetadata(ctx context.Context, dir string) error {
	s.entered <- dir
	<-s.release
	if s.err != nil {
		return s.err
	}
	return s.dirStorage.ReserveMetadata(ctx, dir)
}

func newHeldReservations(t *testing.T, err error) (*driverEnv, *heldReservations) {
	var held *heldReservations
	e := newDriverEnv(t, testConfig(), nil, func(d *Deps) {
		held = &heldReservations{dirStorage: d.Storage.(*dirStorage), entered: make(chan string, 1), release: make(chan struct{}), err: err}
		d.Storage = held
	})
	e.d.Start(e.tasks)
	t.Cleanup(held.releaseOnce) // before the driver's Close, which waits for it
	return e, held
}

func (s *heldReservations) reserving(t *testing.T) string {
	t.Helper()
	select {
	case dir := <-s.entered:
		return dir
	case <-time.After(waitTimeout):
		t.Fatal("ReserveMetadata never ran")
		return ""
	}
}

// TestDriverReservationBesideTrigger: the reservation does not hold up the
// trigger, and the completion waits for it and writes into it.
func TestDriverReservationBesideTrigger(t *testing.T) {
	e, held := newHeldReservations(t, nil)
	res := e.trigger(coordinator.Manual, "")
	dir := held.reserving(t)
	e.triggered(1, "CHECKPOINT") // while the reservation is held
	e.ackAll(1, e.chk(1))
	e.d.Stats() // the acks are in: the completion waits
	select {
	case r := <-res:
		t.Fatalf("checkpoint 1 completed (%+v) before its reservation", r)
	default:
	}
	held.releaseOnce()
	r := waitResult(t, res)
	if r.Err != nil || r.ID != 1 || r.Path != filepath.Join(dir, "_metadata") {
		t.Fatalf("checkpoint 1: %+v, want its _metadata in %s", r, dir)
	}
}

// TestDriverReservationFails: a failed reservation fails the checkpoint as
// a failed _metadata write does, with its error.
func TestDriverReservationFails(t *testing.T) {
	e, held := newHeldReservations(t, errors.New("no space left on device"))
	res := e.trigger(coordinator.Manual, "")
	held.reserving(t)
	held.releaseOnce()
	e.triggered(1, "CHECKPOINT")
	e.ackAll(1, e.chk(1))
	r := waitResult(t, res)
	wantFailure(t, r, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_FINALIZE_CHECKPOINT_FAILURE)
	if want := "no space left on device"; r.Err == nil || !strings.Contains(r.Err.Error(), want) {
		t.Fatalf("failure %v does not say %q", r.Err, want)
	}
}

// TestDriverDiscardAwaitsReservation: an aborted checkpoint's directory is
// removed only after its reservation finished, so the reservation cannot
// leave a file in a directory being removed.
func TestDriverDiscardAwaitsReservation(t *testing.T) {
	e, held := newHeldReservations(t, nil)
	res := e.trigger(coordinator.Manual, "")
	dir := held.reserving(t)
	e.triggered(1, "CHECKPOINT")
	e.d.Decline(&weirv1.DeclineCheckpointRequest{Attempt: e.tasks[2].Attempt, CheckpointId: 1, Message: "io"})
	wantFailure(t, waitResult(t, res), weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED)
	e.d.Stats()
	time.Sleep(50 * time.Millisecond) // a window for a wrong early discard, not a wait for a condition
	if e.rec.has("discard chk-1") {
		t.Fatal("the directory went before its reservation finished")
	}
	held.releaseOnce()
	e.rec.waitFor(t, "discard chk-1")
	wantGone(t, dir)
}
