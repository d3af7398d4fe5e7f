package task

import "time"

// BackPressured returns how long the subtask has been back-pressured: its
// output was full, so it took no new input (or its source did not emit),
// or a write blocked. Safe to call from any goroutine.
func (t *Task) BackPressured() time.Duration {
	return time.Duration(t.backpressured.Load())
}

// markBackpressured tracks the periods the output is unavailable.
func (t *Task) markBackpressured(now time.Time, bp bool) {
	switch {
	case bp && t.bpSince.IsZero():
		t.bpSince = now
		t.metrics.load.enter(loadBackpressured, now)
	case !bp && !t.bpSince.IsZero():
		t.addBackpressured(now.Sub(t.bpSince))
		t.bpSince = time.Time{}
		t.metrics.load.leave(now)
	}
}

// markChainBackpressured marks the whole chain: it waits for room in any
// of its outputs as one.
func (t *Task) markChainBackpressured(now time.Time, bp bool) {
	for m := range t.chain {
		m.markBackpressured(now, bp)
	}
}

// collectBlocked adds the time writes blocked at a full queue.
func (t *Task) collectBlocked() {
	for _, w := range t.writers {
		if w.Backpressured > 0 {
			t.addBackpressured(w.Backpressured)
			t.metrics.load.addBackpressured(w.Backpressured)
			w.Backpressured = 0
		}
	}
}

func (t *Task) addBackpressured(d time.Duration) {
	t.backpressured.Add(int64(d))
	t.metrics.backpressured.Add(d.Seconds())
}
