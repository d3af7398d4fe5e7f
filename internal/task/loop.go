package task

import (
	"context"
	"time"
)

// Run executes the subtask, and the subtasks chained after it, until they
// finish (nil), are cancelled through ctx (ctx's error) or fail.
func (t *Task) Run(ctx context.Context) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	for m := range t.chain {
		m.asyncCtx = ctx
	}
	defer func() {
		cancel()
		for m := range t.chain {
			m.abortChannelState()
		}
		for m := range t.chain {
			m.async.Wait()
		}
		for m := range t.chain {
			m.cleanup()
			m.metrics.release()
		}
	}()
	// Deferred after the cleanup, so it runs first: a panic of the
	// operator, or a failed state backend, ends this subtask alone, with
	// the panic as its failure cause, and the cleanup still runs.
	defer func() {
		if r := recover(); r != nil {
			err = t.panicked(r)
		}
	}()
	for m := range t.chain {
		if err := m.setup(ctx); err != nil {
			return err
		}
	}
	for m := range t.chain {
		if m.cfg.OnRunning != nil {
			m.cfg.OnRunning()
		}
	}
	t.lastFlush = t.now()
	for m := range t.chain {
		m.metrics.load.begin(t.lastFlush)
	}
	var timer *time.Timer
	done := ctx.Done()
	for !t.chainFinished() {
		// A subtask that never waits (a source chained to a sink, with no
		// queue to fill) is cancelled here.
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		idle, wait, err := t.cycle()
		if err != nil {
			return err
		}
		if t.chainFinished() || !idle {
			continue
		}
		// Nothing to do until mail, input or output space arrives, or the
		// next timer (a source's backoff, an alignment timeout) is due.
		var wake <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			wake = timer.C
		}
		// Waiting with room in the output is Flink's idle time; waiting
		// for room is back-pressure, which markBackpressured accounts.
		waitIdle := t.bpSince.IsZero()
		if waitIdle {
			now := t.now()
			for m := range t.chain {
				m.metrics.load.enter(loadIdle, now)
			}
		}
		select {
		case <-t.mailbox.notify:
		case <-t.inputNote:
		case <-t.outputNote:
		case <-wake:
		case <-done:
			return ctx.Err()
		}
		if waitIdle {
			now := t.now()
			for m := range t.chain {
				m.metrics.load.leave(now)
			}
		}
		if timer != nil && wake != nil {
			timer.Stop()
		}
	}
	for m := range t.chain {
		if err := m.finish(); err != nil {
			return err
		}
	}
	return nil
}

// cycle is one turn of the mailbox loop: pending mail, priority events on
// the inputs, due timers, then one step of work if the output has room.
// Mail and priority events are handled even while the output is full, so
// a back-pressured subtask still takes checkpoints. idle means nothing
// more can be done until the loop is woken, or wait passed (if positive).
// A turn covers the subtasks chained after this one too.
func (t *Task) cycle() (idle bool, wait time.Duration, err error) {
	for m := range t.chain {
		if err := m.runMail(); err != nil {
			return false, 0, err
		}
	}
	if t.chainFinished() {
		return false, 0, nil
	}
	if err := t.pollPriority(); err != nil {
		return false, 0, err
	}
	now := t.now()
	if dl, ok := t.barriers.Deadline(); ok {
		if !now.Before(dl) {
			if err := t.apply(t.barriers.OnTimer(now), now, nil); err != nil {
				return false, 0, err
			}
		} else {
			wait = dl.Sub(now)
		}
	}
	for m := range t.chain {
		if o := m.outTO; o != nil {
			switch {
			case !now.Before(o.deadline):
				m.settleOutput(true)
			case !m.holdsBarrier(o.id):
				m.settleOutput(false)
			case wait == 0 || o.deadline.Sub(now) < wait:
				wait = o.deadline.Sub(now)
			}
		}
		if w, ok := m.nextTimeEvent(now); ok && (wait == 0 || w < wait) {
			wait = w
		}
		m.collectBlocked()
	}
	if !t.outputAvailable() {
		if t.src != nil && now.Before(t.backoffUntil) {
			// A source that asked to wait would not emit anyway: a full
			// output does not hold it back until its backoff ends. (Flink
			// counts back-pressure only while a task needs a buffer.)
			t.markChainBackpressured(now, false)
			if w := t.backoffUntil.Sub(now); wait == 0 || w < wait {
				wait = w
			}
			return true, wait, t.flush(now)
		}
		t.markChainBackpressured(now, true)
		// Partly filled batches still go to the consumers that have room.
		return true, wait, t.flush(now)
	}
	t.markChainBackpressured(now, false)
	progressed, backoff, err := t.step()
	if err != nil {
		return false, 0, err
	}
	// A chained subtask's step has only its timers and recovered input
	// to do: its channel delivers nothing.
	for m := t.next; m != nil; m = m.next {
		p, _, err := m.step()
		if err != nil {
			return false, 0, err
		}
		progressed = progressed || p
	}
	t.countChained()
	if progressed {
		if now.Sub(t.lastFlush) >= t.cfg.FlushInterval {
			return false, 0, t.flush(now)
		}
		return false, 0, nil
	}
	// Idle: send what is batched so latency does not wait for a full buffer.
	if backoff > 0 {
		t.backoffUntil = now.Add(backoff)
		if wait == 0 || backoff < wait {
			wait = backoff
		}
		// A source that emits again within the buffer timeout keeps
		// batching until it is up, as a busy one does: flushing at every
		// pause of a rate-limited source sends a message per record and
		// fills the consumers' credit windows. A source that backs off
		// longer flushes now: its records would wait the whole backoff.
		if backoff < t.cfg.FlushInterval && now.Sub(t.lastFlush) < t.cfg.FlushInterval {
			return true, wait, nil
		}
	}
	return true, wait, t.flush(now)
}

func (t *Task) runMail() error {
	for _, m := range t.mailbox.drain() {
		if err := m(); err != nil {
			return err
		}
	}
	return nil
}
