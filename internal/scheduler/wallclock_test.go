package scheduler

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/clocktest"
	"github.com/weirproject/weir/internal/restart"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestRestartDelayIgnoresWallClockSteps sets the JobManager's wall clock
// an hour forward or back while a job waits out its restart delay and
// while it runs until its next failure. clocktest's times keep a true
// monotonic reading under the step, as time.Now's do: the delay must end
// after exactly the time that passed (a restart timer firing right after
// a forward step is early; one firing on time after a backward step is
// not), the timer's deadline must lie the delay ahead on that reading
// (the driver arms it with time.Until), and the exponential backoff must
// keep growing rather than reset as if the step had been a healthy hour.
func TestRestartDelayIgnoresWallClockSteps(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprintf("step=%v", step), func(t *testing.T) {
			clock := clocktest.New()
			spec := &weirv1.RestartStrategy{
				Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, InitialBackoff: durationpb.New(time.Second),
				MaxBackoff: durationpb.New(time.Minute), Multiplier: 2, ResetBackoffThreshold: durationpb.New(time.Minute),
			}
			g := &weirv1.JobGraph{Name: "job", Vertices: []*weirv1.JobVertex{{Name: "src", Parallelism: 1}}}
			j, err := New(Config{JobID: "j", Session: "s", Graph: g, Strategy: restart.New(spec, restart.Budget{}, clock.Now())}, clock)
			if err != nil {
				t.Fatal(err)
			}
			run := func(tm string) {
				t.Helper()
				if err := j.SlotsOffered([]string{tm}); err != nil {
					t.Fatal(err)
				}
				for _, e := range j.execs {
					j.TaskStateChanged(e.Attempt, weirv1.ExecutionState_EXECUTION_STATE_RUNNING, "")
				}
				j.Ready()
			}
			// fail loses tm and returns the restart's delay and timer.
			fail := func(tm string) (time.Duration, ArmTimer) {
				t.Helper()
				j.TaskManagerLost(tm, tm+" lost")
				var delay time.Duration
				var arm *ArmTimer
				for _, e := range j.Ready() {
					switch e := e.(type) {
					case RestartStarted:
						delay = e.Delay
					case ArmTimer:
						arm = &e
					}
				}
				if arm == nil {
					t.Fatalf("losing %s armed no restart timer", tm)
				}
				return delay, *arm
			}

			run("tm1")
			delay, arm := fail("tm1")
			if delay != time.Second {
				t.Fatalf("first restart delay %v, want 1s", delay)
			}
			clock.StepWall(step)
			if left := arm.At.Sub(clock.Now()); left != time.Second {
				t.Fatalf("wall clock set %v: restart timer due in %v, want 1s", step, left)
			}
			j.RestartDue(arm.Restart)
			if got := j.Ready(); len(got) != 0 {
				t.Fatalf("restart timer at once after the wall clock was set %v: effects %v, want none (early)", step, got)
			}
			clock.Advance(time.Second)
			j.RestartDue(arm.Restart)
			if got := j.Ready(); len(got) != 1 || got[0] != (PrepareRestore{Restart: arm.Restart, Full: true}) {
				t.Fatalf("restart timer after the delay, wall clock set %v: effects %v, want PrepareRestore", step, got)
			}
			j.RestoreReady(arm.Restart, nil)
			run("tm2")

			// 10s later, well within the reset threshold, another failure.
			clock.Advance(10 * time.Second)
			clock.StepWall(step)
			if delay, _ := fail("tm2"); delay != 2*time.Second {
				t.Fatalf("second failure 11s after the first, wall clock set %v: delay %v, want the grown 2s", step, delay)
			}
		})
	}
}
