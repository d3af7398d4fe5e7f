package coordinator

import (
	"fmt"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// NextCheckpoint answers "when is the next checkpoint, and what holds it
// back", from the same fields decide() applies its rules to, checked in the
// order decide() checks them. It changes nothing.
func (c *Coordinator) NextCheckpoint() *weirv1.NextCheckpoint {
	n := &weirv1.NextCheckpoint{Queued: int32(len(c.queue))}
	if c.preparing != nil {
		n.Queued++
	}
	set := func(s weirv1.NextCheckpoint_State, r weirv1.NextCheckpoint_Reason, due time.Time, format string, args ...any) *weirv1.NextCheckpoint {
		n.State, n.Reason, n.Message = s, r, fmt.Sprintf(format, args...)
		if !due.IsZero() {
			n.DueTimestampMs = due.UnixMilli()
		}
		return n
	}
	const (
		scheduled    = weirv1.NextCheckpoint_STATE_SCHEDULED
		delayed      = weirv1.NextCheckpoint_STATE_DELAYED
		notScheduled = weirv1.NextCheckpoint_STATE_NOT_SCHEDULED
	)
	switch {
	case c.periodicPaused:
		return set(notScheduled, weirv1.NextCheckpoint_REASON_STOPPED, time.Time{},
			"periodic checkpoints are paused by a stop-with-savepoint")
	case !c.running:
		return set(notScheduled, weirv1.NextCheckpoint_REASON_TASKS_NOT_RUNNING, time.Time{},
			"the job is not running (its tasks are being deployed, restarted or have ended); checkpoints start once every task runs")
	}
	if a := c.notRunning(); a != nil {
		return set(delayed, weirv1.NextCheckpoint_REASON_TASKS_NOT_RUNNING, time.Time{},
			"subtask %s has finished: checkpoints that need every task cannot trigger", a.Key())
	}
	if live := c.pendingIDs(); len(live) >= c.cfg.MaxConcurrent {
		due := c.nextPeriodic
		if len(c.queue) > 0 {
			due = time.Time{} // a request already waits: it runs when one finishes
		}
		oldest := c.pending[live[0]]
		return set(delayed, weirv1.NextCheckpoint_REASON_MAX_CONCURRENT, due,
			"%d checkpoint(s) in progress (max-concurrent-checkpoints %d): the next waits until checkpoint %d completes or expires at %s",
			len(live), c.cfg.MaxConcurrent, oldest.id, oldest.deadline.UTC().Format(time.RFC3339Nano))
	}
	if c.preparing != nil || len(c.queue) > 0 {
		return set(scheduled, weirv1.NextCheckpoint_REASON_QUEUED, time.Time{},
			"%d checkpoint request(s) are being prepared or queued", n.Queued)
	}
	if c.nextPeriodic.IsZero() {
		return set(notScheduled, weirv1.NextCheckpoint_REASON_PERIODIC_OFF, time.Time{},
			"periodic checkpoints are off (no interval): trigger checkpoints manually")
	}
	if !c.lastCompletion.IsZero() && c.cfg.MinPause > 0 {
		// The periodic trigger fires no earlier than the pause's end: either
		// it is due before and will be pushed there, or decide() already did.
		if pauseEnd := c.lastCompletion.Add(c.cfg.MinPause); pauseEnd.After(c.clock.Now()) && !pauseEnd.Before(c.nextPeriodic) {
			return set(delayed, weirv1.NextCheckpoint_REASON_MIN_PAUSE, pauseEnd,
				"min-pause %s after checkpoint %d completed: the next checkpoint waits until the pause is over",
				c.cfg.MinPause, c.lastCompletedID)
		}
	}
	return set(scheduled, weirv1.NextCheckpoint_REASON_UNSPECIFIED, c.nextPeriodic,
		"the next periodic checkpoint triggers every %s", c.interval())
}

// notRunning returns a subtask of the current execution that has finished.
func (c *Coordinator) notRunning() *weirv1.ExecutionAttemptID {
	for _, t := range c.tasks {
		if c.finished[t.Attempt.Key()] {
			return t.Attempt
		}
	}
	return nil
}
