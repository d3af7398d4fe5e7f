package task

import (
	"fmt"
	"slices"
	"time"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/sdk"
)

// step does one unit of work: one Emit of a source, or up to StepRecords
// records of input (or one event).
func (t *Task) step() (progressed bool, backoff time.Duration, err error) {
	now := t.now()
	// The clock TTL states read, and their expired entries swept a
	// bounded batch at a time.
	t.backend.AdvanceTime(now.UnixMilli())
	if err := t.fireProcessingTimers(now); err != nil {
		return false, 0, err
	}
	if t.src != nil {
		if t.endOfInput || t.suspended {
			return false, 0, nil
		}
		t.out.count = 0
		t.srcOut.now = now
		st, err := t.src.Emit(&t.srcOut)
		t.metrics.recordsOut.Add(float64(t.out.count))
		if err == nil {
			err = t.out.err
		}
		if err != nil {
			return false, 0, fmt.Errorf("task: source %s: %w", t.desc.GetOperator(), err)
		}
		if st.Backlog != sdk.BacklogUnknown {
			t.backlog.Store(uint32(st.Backlog))
		}
		if st.EndOfInput {
			return true, 0, t.reachEndOfInput()
		}
		if err := t.pollWatermarks(now); err != nil {
			return false, 0, err
		}
		return st.Backoff <= 0, st.Backoff, nil
	}
	if len(t.cur.recs) > 0 {
		return true, 0, t.process()
	}
	// Recovered input state goes first, channel by channel.
	for ch := range t.replay {
		if t.nextReplay(ch) {
			return true, 0, t.process()
		}
	}
	n := len(t.inputs)
	for k := 0; k < n; k++ {
		ch := (t.nextChannel + k) % n
		if t.eop[ch] || t.barriers.Blocked(ch) {
			continue
		}
		b, ok, err := t.inputs[ch].Poll()
		if err != nil {
			return false, 0, fmt.Errorf("task: input channel %d: %w", ch, err)
		}
		if !ok {
			continue
		}
		t.nextChannel = (ch + 1) % n
		if b.Kind == exchange.KindRecords {
			t.cur.ch, t.cur.recs, t.cur.batch = ch, b.Records, b.Records
			return true, 0, t.process()
		}
		return true, 0, t.handle(ch, b)
	}
	return false, 0, nil
}

// nextReplay makes the next recovered input buffer of channel ch the one
// being processed, if there is one.
func (t *Task) nextReplay(ch int) bool {
	if ch >= len(t.replay) || len(t.replay[ch]) == 0 {
		return false
	}
	t.cur.ch, t.cur.recs, t.cur.batch = ch, t.replay[ch][0].Records, t.replay[ch][0].Records
	t.replay[ch] = t.replay[ch][1:]
	return true
}

// pollPriority handles the priority events (unaligned barriers) waiting on
// any input channel, blocked or not, ahead of the data queued there. A
// channel still replaying recovered input is left alone: its events come
// after that input.
func (t *Task) pollPriority() error {
	for ch, in := range t.inputs {
		if t.eop[ch] || len(t.replay[ch]) > 0 {
			continue
		}
		for {
			b, ok, err := in.PollPriority()
			if err != nil {
				return fmt.Errorf("task: input channel %d: %w", ch, err)
			}
			if !ok {
				break
			}
			if err := t.handle(ch, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// process runs the next StepRecords records of the current input buffer
// through the operator.
func (t *Task) process() error {
	ch := t.cur.ch
	n := min(len(t.cur.recs), t.cfg.StepRecords)
	recs := t.cur.recs[:n:n]
	t.cur.recs = t.cur.recs[n:]
	var done []sdk.Record
	if len(t.cur.recs) == 0 {
		t.cur.recs, done, t.cur.batch = nil, t.cur.batch, nil
	}
	// Records read before the channel's barrier of an unaligned
	// checkpoint whose snapshot is taken belong to its channel state (a
	// copy: the batch is released below).
	if t.rec != nil && t.barriers.Recording(ch) {
		t.rec.addInput(ch, exchange.Buffer{Kind: exchange.KindRecords, Records: slices.Clone(recs)})
	}
	if t.barriers.Aligning() != 0 {
		t.align.processed += exchange.Buffer{Records: recs}.Size()
	}
	t.out.count = 0
	multi, _ := t.op.(sdk.MultiInputOperator)
	for _, r := range recs {
		t.backend.SetCurrentKey(r.Key)
		t.et.curKey = r.Key
		var err error
		if multi != nil {
			err = multi.ProcessInput(t.gate[ch], r, t.out)
		} else {
			err = t.op.ProcessRecord(r, t.out)
		}
		if err != nil {
			return fmt.Errorf("task: %s: process record: %w", t.desc.GetOperator(), err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	t.metrics.recordsIn.Add(float64(len(recs)))
	t.metrics.recordsOut.Add(float64(t.out.count))
	if done != nil {
		exchange.ReleaseRecords(done)
	}
	return nil
}

// handle carries out an event read from input channel ch.
func (t *Task) handle(ch int, b exchange.Buffer) error {
	switch b.Kind {
	case exchange.KindBarrier:
		now := t.now()
		d, err := t.barriers.OnBarrier(ch, b.Barrier, now)
		if err != nil {
			return err
		}
		if d.Started == b.Barrier.GetCheckpointId() {
			t.observeStartDelay(b.Barrier, now)
		}
		return t.apply(d, now, func(rec *channelRecorder) {
			if !b.Priority || rec.id != b.Barrier.GetCheckpointId() {
				return
			}
			// The barrier overtook data of its own channel that is not
			// processed yet: the rest of the buffer being processed, and
			// what the channel held when the barrier reached it. It all
			// precedes the barrier, so it is channel state.
			if t.cur.ch == ch && len(t.cur.recs) > 0 {
				rec.addInput(ch, exchange.Buffer{Kind: exchange.KindRecords, Records: slices.Clone(t.cur.recs)})
			}
			for _, o := range b.Overtaken {
				rec.addInput(ch, o)
			}
		})
	case exchange.KindCancelMarker:
		d, err := t.barriers.OnCancelMarker(ch, b.CheckpointID)
		if err != nil {
			return err
		}
		return t.apply(d, t.now(), nil)
	case exchange.KindWatermark:
		return t.onValve(t.et.valve.OnWatermark(ch, b.Watermark))
	case exchange.KindWatermarkStatus:
		return t.onValve(t.et.valve.OnStatus(ch, b.Idle))
	case exchange.KindEndOfData:
		t.endOfData[ch] = true
		return t.maybeEndOfInput()
	case exchange.KindEndOfPartition:
		t.eop[ch] = true
		t.endOfData[ch] = true
		d, err := t.barriers.OnEndOfPartition(ch)
		if err != nil {
			return err
		}
		if err := t.apply(d, t.now(), nil); err != nil {
			return err
		}
		if err := t.onValve(t.et.valve.OnEndOfPartition(ch)); err != nil {
			return err
		}
		return t.maybeEndOfInput()
	}
	return fmt.Errorf("task: unexpected %s on channel %d", b.Kind, ch)
}

func (t *Task) maybeEndOfInput() error {
	if t.endOfInput {
		return nil
	}
	for _, e := range t.endOfData {
		if !e {
			return nil
		}
	}
	if err := t.endEventTime(); err != nil {
		return err
	}
	if e, ok := t.op.(sdk.InputEnder); ok {
		if err := e.EndInput(t.out); err != nil {
			return fmt.Errorf("task: %s: end input: %w", t.desc.GetOperator(), err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	return t.reachEndOfInput()
}

func (t *Task) reachEndOfInput() error {
	t.endOfInput = true
	t.log.Info("end of input reached; finishing after the job's final checkpoint")
	if t.cfg.OnEndOfInput != nil {
		t.cfg.OnEndOfInput()
	}
	// Event time ends with the input, whether or not the source had a
	// watermark strategy: every event-time timer downstream fires before
	// the job's final checkpoint.
	if err := t.emitStatus(false); err != nil {
		return err
	}
	if err := t.emitWatermark(sdk.MaxWatermark); err != nil {
		return err
	}
	if t.src != nil {
		t.et.input = sdk.MaxWatermark
		t.publishWatermarks()
	}
	return t.broadcast(exchange.Buffer{Kind: exchange.KindEndOfData})
}
