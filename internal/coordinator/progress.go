package coordinator

import (
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Progress records how far subtask a got with the checkpoints it reported
// (with its TaskManager's heartbeat). It only feeds the statistics: a
// report never changes a checkpoint's outcome, since it may be stale.
func (c *Coordinator) Progress(a *weirv1.ExecutionAttemptID, progress []*weirv1.CheckpointProgress) {
	now := c.clock.Now()
	for _, p := range progress {
		if c.pending[p.GetCheckpointId()] == nil {
			continue // done, or never ours: nothing left to explain
		}
		c.stats.progress(p.GetCheckpointId(), a, p, now)
	}
}
