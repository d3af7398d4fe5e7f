package clocktest

import (
	"testing"
	"time"
)

// TestStepMovesOnlyTheWallReading checks the property the package exists
// for, through the public API only: after a step, durations between the
// clock's times (monotonic) ignore it, and their wall readings (what Unix
// numbers, serialization and UTC see) show it.
func TestStepMovesOnlyTheWallReading(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		c := New()
		before := c.Now()
		c.Advance(3 * time.Second)
		c.StepWall(step)
		c.Advance(2 * time.Second)
		after := c.Now()
		if got := after.Sub(before); got != 5*time.Second {
			t.Errorf("step %v: monotonic elapsed %v, want 5s", step, got)
		}
		if got := after.Round(0).Sub(before.Round(0)); got != 5*time.Second+step {
			t.Errorf("step %v: wall elapsed %v, want %v", step, got, 5*time.Second+step)
		}
		if got := after.UnixMilli() - before.UnixMilli(); got != (5*time.Second + step).Milliseconds() {
			t.Errorf("step %v: Unix milliseconds moved %d, want %d", step, got, (5*time.Second + step).Milliseconds())
		}
		// Derived deadlines keep both readings: Add moves both alike.
		deadline := before.Add(10 * time.Second)
		if !after.Before(deadline) || deadline.Sub(after) != 5*time.Second {
			t.Errorf("step %v: deadline 10s after the first time is %v after the second, want 5s", step, deadline.Sub(after))
		}
	}
}

func TestWallShiftedRefusesTimesWithoutMonotonicReading(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a time without a monotonic reading")
		}
	}()
	WallShifted(time.Unix(1_700_000_000, 0), time.Hour)
}
