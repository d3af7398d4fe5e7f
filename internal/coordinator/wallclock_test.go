package coordinator

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/clocktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The tests in this file set the JobManager's wall clock an hour forward
// or back in the middle of the coordinator's timing rules (checkpoint
// timeout, periodic trigger, min pause) and check that each rule still
// acts after exactly the time that really passed. clocktest's times keep
// a true monotonic reading while their wall reading jumps, as time.Now's
// do when the machine's clock is set: logic that compares them with Sub,
// Before and Add acts on the monotonic reading and passes; logic that
// compared Unix numbers or wall readings would expire, trigger or skip
// at the step and fail.

var wallSteps = []time.Duration{time.Hour, -time.Hour}

var (
	wallSrc  = &weirv1.ExecutionAttemptID{JobId: "job-1", Vertex: "src"}
	wallSink = &weirv1.ExecutionAttemptID{JobId: "job-1", Vertex: "sink"}
)

func TestCheckpointTimeoutIgnoresWallClockSteps(t *testing.T) {
	for _, step := range wallSteps {
		t.Run(fmt.Sprintf("step=%v", step), func(t *testing.T) {
			clock := clocktest.New()
			c := New(Config{JobID: "job-1", Timeout: time.Minute, MaxConcurrent: 1, Tolerable: 10},
				clock, rand.New(constSource(math.MaxUint64)))
			c.Start([]Task{{Attempt: wallSrc, Source: true}, {Attempt: wallSink}})
			req := c.Trigger(Manual, false, "")
			c.IDAllocated(req, 1, nil)
			c.LocationReady(1, "/ckpt/chk-1", nil)
			if !hasEffect[SendTrigger](c.Ready()) {
				t.Fatal("checkpoint 1 was not triggered")
			}

			clock.Advance(10 * time.Second)
			clock.StepWall(step)
			c.Tick()
			if got := c.Ready(); len(got) != 0 || c.NumPending() != 1 {
				t.Fatalf("10s into a 1m timeout, wall clock set %v: effects %v, %d pending; want none, 1", step, got, c.NumPending())
			}
			if left := c.NextDeadline().Sub(clock.Now()); left != 50*time.Second {
				t.Fatalf("timeout due in %v, want 50s", left)
			}
			if c.Acknowledge(&weirv1.AcknowledgeCheckpointRequest{CheckpointId: 1, Attempt: wallSink}) != AckSuccess {
				t.Fatal("ack of sink refused")
			}
			detail, _ := c.CheckpointDetail(1)
			for _, st := range detail.GetSubtasks() {
				if st.GetAcknowledged() && st.GetEndToEndDurationMs() != 10_000 {
					t.Errorf("sink acked after %d ms, want 10000", st.GetEndToEndDurationMs())
				}
			}

			clock.Advance(50*time.Second - time.Millisecond)
			c.Tick()
			if got := c.Ready(); len(got) != 0 {
				t.Fatalf("1ms before the timeout: effects %v, want none", got)
			}
			clock.Advance(time.Millisecond)
			c.Tick()
			if r := expectFailed(t, c.Ready()); r != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED {
				t.Fatalf("at the timeout: checkpoint failed with %v, want EXPIRED", r)
			}
			if d := c.Stats().GetLatestFailed().GetEndToEndDurationMs(); d != 60_000 {
				t.Errorf("expired checkpoint ran %d ms, want 60000", d)
			}
		})
	}
}

func TestPeriodicTriggerAndMinPauseIgnoreWallClockSteps(t *testing.T) {
	for _, step := range wallSteps {
		t.Run(fmt.Sprintf("step=%v", step), func(t *testing.T) {
			clock := clocktest.New()
			// A min pause longer than the interval: the first trigger comes
			// after the pause, and every later one is held back by it.
			c := New(Config{JobID: "job-1", Interval: 2 * time.Second, MinPause: 5 * time.Second, Timeout: time.Minute, MaxConcurrent: 1},
				clock, rand.New(constSource(math.MaxUint64)))
			c.Start([]Task{{Attempt: wallSrc, Source: true}})

			clock.StepWall(step)
			clock.Advance(5*time.Second - time.Millisecond)
			c.Tick()
			if got := c.Ready(); len(got) != 0 {
				t.Fatalf("1ms before the first trigger, wall clock set %v: effects %v, want none", step, got)
			}
			clock.Advance(time.Millisecond)
			c.Tick()
			req := expectAllocate(t, c.Ready())
			completeCheckpoint(t, c, req, 1)

			// Due again at +7s, but only 2s after the completion.
			clock.Advance(2 * time.Second)
			clock.StepWall(step)
			c.Tick()
			if r := expectFailed(t, c.Ready()); r != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_MINIMUM_TIME_BETWEEN_CHECKPOINTS {
				t.Fatalf("2s after a completion, wall clock set %v: request failed with %v, want MINIMUM_TIME_BETWEEN_CHECKPOINTS", step, r)
			}
			if left := c.NextDeadline().Sub(clock.Now()); left != 3*time.Second {
				t.Fatalf("next trigger in %v, want 3s (the rest of the pause)", left)
			}
			clock.Advance(3 * time.Second)
			c.Tick()
			expectAllocate(t, c.Ready())
		})
	}
}

// completeCheckpoint takes request req through its chain as checkpoint id
// of the single source task, up to Finalized.
func completeCheckpoint(t *testing.T, c *Coordinator, req, id int64) {
	t.Helper()
	c.IDAllocated(req, id, nil)
	c.LocationReady(id, fmt.Sprintf("/ckpt/chk-%d", id), nil)
	if !hasEffect[SendTrigger](c.Ready()) {
		t.Fatalf("checkpoint %d was not triggered", id)
	}
	c.Acknowledge(&weirv1.AcknowledgeCheckpointRequest{CheckpointId: id, Attempt: wallSrc})
	if !hasEffect[Finalize](c.Ready()) {
		t.Fatalf("checkpoint %d was not finalized", id)
	}
	c.Finalized(id, fmt.Sprintf("/ckpt/chk-%d", id), 0, nil)
	for _, e := range c.Ready() {
		if d, ok := e.(RequestDone); ok && d.Err != nil {
			t.Fatalf("checkpoint %d: %v", id, d.Err)
		}
	}
}

func hasEffect[T Effect](effects []Effect) bool {
	for _, e := range effects {
		if _, ok := e.(T); ok {
			return true
		}
	}
	return false
}

func expectAllocate(t *testing.T, effects []Effect) int64 {
	t.Helper()
	for _, e := range effects {
		if a, ok := e.(AllocateID); ok {
			return a.Request
		}
	}
	t.Fatalf("effects %v, want AllocateID", effects)
	return 0
}

// expectFailed returns the reason of the failed RequestDone among effects.
func expectFailed(t *testing.T, effects []Effect) weirv1.CheckpointFailureReason {
	t.Helper()
	for _, e := range effects {
		var f *Failure
		if d, ok := e.(RequestDone); ok && errors.As(d.Err, &f) {
			return f.Reason
		}
	}
	t.Fatalf("effects %v, want a failed RequestDone", effects)
	return 0
}
