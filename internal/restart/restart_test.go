package restart

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/clocktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type step struct {
	at    time.Duration // failure time since t0
	delay time.Duration
	ok    bool
}

func TestStrategies(t *testing.T) {
	d := durationpb.New
	cases := map[string]struct {
		spec  *weirv1.RestartStrategy
		steps []step
	}{
		"none never restarts": {
			spec:  &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_NONE},
			steps: []step{{0, 0, false}},
		},
		"fixed-delay gives attempts restarts then fails": {
			spec:  &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 2, Delay: d(time.Second)},
			steps: []step{{0, time.Second, true}, {time.Hour, time.Second, true}, {2 * time.Hour, 0, false}},
		},
		"exponential-delay grows, caps and resets after a healthy period": {
			spec: &weirv1.RestartStrategy{
				Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, Attempts: 10,
				InitialBackoff: d(time.Second), MaxBackoff: d(5 * time.Second), Multiplier: 2,
				ResetBackoffThreshold: d(time.Minute),
			},
			steps: []step{
				{0, time.Second, true},
				{2 * time.Second, 2 * time.Second, true},
				{5 * time.Second, 4 * time.Second, true},
				{10 * time.Second, 5 * time.Second, true},
				{16 * time.Second, 5 * time.Second, true},
				// healthy for longer than reset (+ the last backoff): start over
				{16*time.Second + 5*time.Second + time.Minute, time.Second, true},
			},
		},
		"exponential-delay with attempts fails when they run out before a reset": {
			spec: &weirv1.RestartStrategy{
				Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, Attempts: 2,
				InitialBackoff: d(time.Second), MaxBackoff: d(time.Minute), Multiplier: 3,
				ResetBackoffThreshold: d(time.Hour),
			},
			steps: []step{{0, time.Second, true}, {2 * time.Second, 3 * time.Second, true}, {6 * time.Second, 0, false}},
		},
	}
	for name, c := range cases {
		// Failover: after every failure a new leader rebuilds the strategy
		// from the stored budget (through JSON, as etcd holds it); the
		// decisions must be those of one strategy living throughout.
		for _, failover := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/failover=%t", name, failover), func(t *testing.T) {
				s := New(c.spec, Budget{}, t0)
				for i, st := range c.steps {
					delay, ok := s.Failure(t0.Add(st.at))
					if delay != st.delay || ok != st.ok {
						t.Fatalf("failure %d at +%v: got (%v, %t), want (%v, %t); %s", i, st.at, delay, ok, st.delay, st.ok, s.Describe())
					}
					if failover {
						b, err := json.Marshal(s.Budget())
						if err != nil {
							t.Fatal(err)
						}
						var stored Budget
						if err := json.Unmarshal(b, &stored); err != nil {
							t.Fatal(err)
						}
						s = New(c.spec, stored, t0.Add(st.at))
					}
				}
			})
		}
	}
}

// TestResetThresholdIgnoresWallClockSteps: a new leader takes over the
// budget of a job that failed just before, then its wall clock is set an
// hour forward or back while the job runs on. Whether the next failure
// resets the backoff must depend on how long the job really ran: the step
// must neither reset it early (a failing job would get fresh attempts)
// nor keep it from resetting after a healthy period.
//
// The stored failure time is a wall reading (it comes from another
// process), and so is the takeover's; from the takeover on the healthy
// period is measured on the clock's monotonic reading, which clocktest
// keeps while it steps the wall reading. Measured on wall readings, the
// forward step would count as an hour of healthy running.
func TestResetThresholdIgnoresWallClockSteps(t *testing.T) {
	spec := &weirv1.RestartStrategy{
		Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, Attempts: 10,
		InitialBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Minute), Multiplier: 2,
		ResetBackoffThreshold: durationpb.New(10 * time.Minute),
	}
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprintf("step=%v", step), func(t *testing.T) {
			clock := clocktest.New()
			old := New(spec, Budget{}, clock.Now())
			if d, ok := old.Failure(clock.Now()); !ok || d != time.Second {
				t.Fatalf("first failure: got (%v, %t), want (1s, true)", d, ok)
			}
			stored := roundTrip(t, old.Budget())

			// The new leader takes over 5s later, then its clock is set.
			clock.Advance(5 * time.Second)
			s := New(spec, stored, clock.Now())
			clock.StepWall(step)
			clock.Advance(time.Minute)
			if d, ok := s.Failure(clock.Now()); !ok || d != 2*time.Second {
				t.Fatalf("failure 65s after the last, wall clock stepped %v: got (%v, %t), want the grown backoff (2s, true)", step, d, ok)
			}

			// Once more across a takeover and a step the same way, now
			// healthy for longer than the threshold plus the backoff: the
			// backoff starts over.
			stored = roundTrip(t, s.Budget())
			clock.Advance(time.Minute)
			s = New(spec, stored, clock.Now())
			clock.StepWall(step)
			clock.Advance(10 * time.Minute)
			if d, ok := s.Failure(clock.Now()); !ok || d != time.Second {
				t.Fatalf("failure 11m after the last, wall clock stepped %v: got (%v, %t), want a reset backoff (1s, true)", step, d, ok)
			}
		})
	}
}

// TestRebaseTakesALastFailureAheadOfTheClockAsNow: a budget stored by a
// JobManager whose clock ran ahead cannot postpone the reset beyond the
// threshold counted from the takeover.
func TestRebaseTakesALastFailureAheadOfTheClockAsNow(t *testing.T) {
	spec := &weirv1.RestartStrategy{
		Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, Attempts: 10,
		InitialBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Minute), Multiplier: 2,
		ResetBackoffThreshold: durationpb.New(time.Minute),
	}
	clock := clocktest.New()
	ahead := clock.Now().Round(0).Add(time.Hour)
	s := New(spec, Budget{Used: 3, Current: 4 * time.Second, LastFailure: ahead}, clock.Now())
	clock.Advance(time.Minute + 4*time.Second)
	if d, ok := s.Failure(clock.Now()); !ok || d != time.Second {
		t.Fatalf("failure after the threshold from the takeover: got (%v, %t), want a reset backoff (1s, true)", d, ok)
	}
}

// roundTrip stores b as etcd holds it, through JSON.
func roundTrip(t *testing.T, b Budget) Budget {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var stored Budget
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	return stored
}
