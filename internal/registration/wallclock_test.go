package registration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/clocktest"
)

// The tests in this file set the TaskManager's wall clock an hour forward
// or back while its registration waits for the JobManager. clocktest's
// times keep a true monotonic reading under the step, as time.Now's do:
// the registration must run out after exactly its heartbeat timeout of
// time that passed. Compared on wall readings, a forward step would cancel
// the subtasks at once although the JobManager still counts them, and a
// backward one would keep them writing an hour after the JobManager
// redeployed them elsewhere.

var wallSteps = []time.Duration{time.Hour, -time.Hour}

// wallOrphan is the orphan timeout of these tests.
const wallOrphan = 10 * time.Second

// registeredMember returns a member registered with jm1 (heartbeat every
// 1s, timeout 5s) whose first heartbeat was answered at the clock's now.
func registeredMember(t *testing.T, clock Clock) *Member {
	t.Helper()
	m := New(clock, wallOrphan)
	m.LeaderChanged("jm1")
	m.Registered(m.inflight, Registration{ID: "r1", JobManagerID: "jm-1", Interval: time.Second, Timeout: 5 * time.Second}, nil)
	if !m.HeartbeatDone(m.inflight, false, nil) {
		t.Fatal("first heartbeat answer ignored")
	}
	m.Ready()
	return m
}

func cancels(effects []Effect) bool {
	for _, e := range effects {
		if _, ok := e.(CancelSubtasks); ok {
			return true
		}
	}
	return false
}

func TestHeartbeatTimeoutIgnoresWallClockSteps(t *testing.T) {
	for _, step := range wallSteps {
		t.Run(fmt.Sprintf("step=%v", step), func(t *testing.T) {
			clock := clocktest.New()
			m := registeredMember(t, clock)
			clock.StepWall(step)
			// Every heartbeat from here on fails; each goes out a second
			// after the one before and fails at once.
			unreachable := errors.New("unreachable")
			for elapsed := time.Second; elapsed <= 5*time.Second; elapsed += time.Second {
				if left := m.NextDeadline().Sub(clock.Now()); left != time.Second {
					t.Fatalf("+%v, wall clock set %v: next heartbeat in %v, want 1s", elapsed-time.Second, step, left)
				}
				clock.Advance(time.Second)
				m.Tick()
				if !m.HeartbeatDone(m.inflight, false, unreachable) {
					t.Fatalf("+%v: no heartbeat was sent", elapsed)
				}
				got := m.Ready()
				if elapsed < 5*time.Second && (cancels(got) || !m.registered) {
					t.Fatalf("heartbeat failed +%v after the last answer (timeout 5s), wall clock set %v: effects %v, want still registered", elapsed, step, got)
				}
				if elapsed == 5*time.Second && (cancels(got) || m.registered) {
					t.Fatalf("heartbeat failed at the 5s timeout, wall clock set %v: effects %v, want unregistered, subtasks running", step, got)
				}
			}
			if d := m.orphanedAt.Add(wallOrphan).Sub(clock.Now()); d != wallOrphan {
				t.Fatalf("wall clock set %v: subtasks cancelled in %v, want %v", step, d, wallOrphan)
			}
		})
	}
}

func TestOrphanTimeoutIgnoresWallClockSteps(t *testing.T) {
	for _, step := range wallSteps {
		t.Run(fmt.Sprintf("step=%v", step), func(t *testing.T) {
			clock := clocktest.New()
			m := registeredMember(t, clock)
			m.LeaderChanged("")
			m.Ready()
			clock.Advance(time.Second)
			clock.StepWall(step)
			m.Tick()
			if got := m.Ready(); len(got) != 0 {
				t.Fatalf("1s without a leader (timeout 5s), wall clock set %v: effects %v, want none", step, got)
			}
			if left := m.NextDeadline().Sub(clock.Now()); left != 4*time.Second {
				t.Fatalf("registration runs out in %v, want 4s", left)
			}
			clock.Advance(4*time.Second - time.Millisecond)
			m.Tick()
			if got := m.Ready(); len(got) != 0 {
				t.Fatalf("1ms before the timeout: effects %v, want none", got)
			}
			clock.Advance(time.Millisecond)
			m.Tick()
			if got := m.Ready(); cancels(got) || m.registered {
				t.Fatalf("at the timeout, wall clock set %v: effects %v, want unregistered, subtasks running", step, got)
			}
			clock.Advance(wallOrphan - time.Millisecond)
			m.Tick()
			if got := m.Ready(); len(got) != 0 {
				t.Fatalf("1ms before the orphan timeout: effects %v, want none", got)
			}
			clock.Advance(time.Millisecond)
			m.Tick()
			if got := m.Ready(); !cancels(got) {
				t.Fatalf("at the orphan timeout, wall clock set %v: effects %v, want CancelSubtasks", step, got)
			}
		})
	}
}
