package jobmanager

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/clocktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestHeartbeatExpiryIgnoresWallClockSteps sets the JobManager's wall
// clock an hour forward or back between a TaskManager's heartbeats and the
// expiry check. clocktest's times keep a true monotonic reading under the
// step, as time.Now's and the ticker's do: a TaskManager that heartbeats
// within the timeout must stay, a silent one must go after exactly the
// timeout. Compared on wall readings, a forward step would drop every
// TaskManager at once (failing all their jobs over) and a backward one
// would keep a dead TaskManager's slots an hour longer.
func TestHeartbeatExpiryIgnoresWallClockSteps(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprintf("step=%v", step), func(t *testing.T) {
			s, err := New(Config{CheckpointDir: t.TempDir(), HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			clock := clocktest.New()
			s.now = clock.Now
			// As RegisterTaskManager leaves them, without the connection
			// that no step here uses.
			s.mu.tms.Register("tm1", "r1", 1, &taskManager{id: "tm1", registration: "r1"}, s.now())
			s.mu.tms.Register("tm2", "r2", 1, &taskManager{id: "tm2", registration: "r2"}, s.now())
			heartbeat := func(id, reg string) {
				t.Helper()
				resp, err := s.Heartbeat(context.Background(), &weirv1.HeartbeatRequest{TaskmanagerId: id, RegistrationId: reg})
				if err != nil || resp.GetReregister() {
					t.Fatalf("heartbeat of %s: %v, reregister=%t", id, err, resp.GetReregister())
				}
			}
			dropped := func() []string {
				var ids []string
				for _, tm := range s.dropSilent(s.now()) {
					ids = append(ids, tm.id)
				}
				return ids
			}

			// tm1 heartbeats every second throughout; tm2 falls silent.
			clock.StepWall(step)
			for range 5 {
				clock.Advance(time.Second)
				heartbeat("tm1", "r1")
				if got := dropped(); len(got) != 0 {
					t.Fatalf("within the 5s timeout, wall clock set %v: dropped %v, want none", step, got)
				}
			}
			clock.Advance(time.Millisecond)
			if got := dropped(); len(got) != 1 || got[0] != "tm2" {
				t.Fatalf("tm2 silent for 5s+1ms, wall clock set %v: dropped %v, want [tm2]", step, got)
			}
			clock.StepWall(-2 * step)
			clock.Advance(4 * time.Second)
			if got := dropped(); len(got) != 0 {
				t.Fatalf("tm1 4s after its heartbeat, wall clock set back %v: dropped %v, want none", -2*step, got)
			}
		})
	}
}
