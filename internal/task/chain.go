package task

import (
	"fmt"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/sdk"
)

// Chain fuses subtasks into one: tasks[0] is the head, each next one reads
// the one before it. They run on the head's goroutine (Run the head only),
// and what an operator emits goes to the next one's by function call: no
// buffer, no queue, no wake-up. Each keeps its own state, acknowledgements,
// timers and metrics, so the job and its checkpoints look the same chained
// or not, and a savepoint of one restores into the other.
//
// Each task must have been built with New for a descriptor in which it has
// one input gate of one channel, from the one before it, and the one before
// it has one output, to it; the descriptors need not change for the chain.
func Chain(tasks []*Task) error {
	for i := 1; i < len(tasks); i++ {
		up, down := tasks[i-1], tasks[i]
		outs, ins := up.desc.GetOutputs(), down.desc.GetInputs()
		if len(outs) != 1 || outs[0].GetTargetVertex() != down.attempt.GetVertex() || outs[0].GetOutput() != "" {
			return fmt.Errorf("task: cannot chain %s to %s: it must be the only consumer of %s's main output", down.attempt.GetVertex(), up.attempt.GetVertex(), up.attempt.GetVertex())
		}
		if len(ins) != 1 || ins[0].GetSourceVertex() != up.attempt.GetVertex() || len(ins[0].GetChannels()) != 1 {
			return fmt.Errorf("task: cannot chain %s to %s: it must read one channel of %s and nothing else", down.attempt.GetVertex(), up.attempt.GetVertex(), up.attempt.GetVertex())
		}
		if down.src != nil {
			return fmt.Errorf("task: cannot chain source %s", down.attempt.GetVertex())
		}
		up.next, down.prev = down, up
		// One goroutine waits for all their mail and output space.
		down.mailbox.notify = tasks[0].mailbox.notify
		down.outputNote = tasks[0].outputNote
	}
	return nil
}

// chain yields the task and the ones chained after it.
func (t *Task) chain(yield func(*Task) bool) {
	for m := t; m != nil; m = m.next {
		if !yield(m) {
			return
		}
	}
}

// chainFinished: every subtask of the chain had its final checkpoint.
func (t *Task) chainFinished() bool {
	for m := range t.chain {
		if !m.finished {
			return false
		}
	}
	return true
}

// chainedInput stands for a chained subtask's input channel: what the
// subtask before it emits arrives by function call, never through here.
type chainedInput struct{}

func (chainedInput) Poll() (exchange.Buffer, bool, error) { return exchange.Buffer{}, false, nil }
func (chainedInput) PollPriority() (exchange.Buffer, bool, error) {
	return exchange.Buffer{}, false, nil
}
func (chainedInput) Close() {}

// processChained runs one record the subtask before it in the chain
// emitted through the operator.
func (t *Task) processChained(r sdk.Record) error {
	if err := t.drainReplay(); err != nil {
		return err
	}
	before := t.out.count
	t.backend.SetCurrentKey(r.Key)
	t.et.curKey = r.Key
	if err := t.op.ProcessRecord(r, t.out); err != nil {
		return fmt.Errorf("task: %s: process record: %w", t.desc.GetOperator(), err)
	}
	t.chainIn++
	t.chainOut += int64(t.out.count - before)
	return t.out.err
}

// receive handles an event the subtask before it in the chain sent.
func (t *Task) receive(b exchange.Buffer) error {
	if err := t.drainReplay(); err != nil {
		return err
	}
	return t.handle(0, b)
}

// drainReplay processes what is left of the recovered input before
// anything the subtask before it sends now, which came later in the
// stream: records, barriers, the end of the input. (Unchained, the channel
// is read only once the recovered input is processed.)
func (t *Task) drainReplay() error {
	for len(t.cur.recs) > 0 || t.nextReplay(0) {
		if err := t.process(); err != nil {
			return err
		}
	}
	return nil
}

// countChained adds what the chained subtasks processed since the last
// call to their metrics: once per turn of the loop, not per record.
func (t *Task) countChained() {
	for m := t.next; m != nil; m = m.next {
		if m.chainIn > 0 {
			m.metrics.recordsIn.Add(float64(m.chainIn))
			m.chainIn = 0
		}
		if m.chainOut > 0 {
			m.metrics.recordsOut.Add(float64(m.chainOut))
			m.chainOut = 0
		}
	}
}
