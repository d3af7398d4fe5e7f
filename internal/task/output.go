package task

import (
	"time"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/sdk"
)

// broadcast sends an event to every consumer, behind the records emitted
// before it; it never blocks.
func (t *Task) broadcast(b exchange.Buffer) error {
	if t.next != nil {
		if err := t.next.receive(b); err != nil {
			return err
		}
	}
	for _, w := range t.writers {
		if err := w.Broadcast(b); err != nil {
			return err
		}
	}
	t.lastFlush = t.now()
	return nil
}

// flush sends the partly filled batches of every subpartition with room.
func (t *Task) flush(now time.Time) error {
	for m := range t.chain {
		for _, w := range m.writers {
			if err := w.FlushAvailable(); err != nil {
				return err
			}
		}
		m.lastFlush = now
	}
	return nil
}

// outputAvailable reports whether every output subpartition has room, so
// the subtask may take new work.
func (t *Task) outputAvailable() bool {
	for m := range t.chain {
		for _, w := range m.writers {
			if !w.Available() {
				return false
			}
		}
	}
	return true
}

// collector fans an operator's output out to every output edge, or hands
// it to the next operator of the chain.
type collector struct {
	writers []*exchange.RecordWriter
	next    *Task
	count   int
	err     error
}

func (c *collector) Collect(r sdk.Record) {
	if c.err != nil {
		return
	}
	c.count++
	if c.next != nil {
		c.err = c.next.processChained(r)
		return
	}
	for _, w := range c.writers {
		if err := w.Emit(r); err != nil {
			c.err = err
			return
		}
	}
}

// sideCollector is a named side output; its records count, and its write
// errors fail, like the main output's.
type sideCollector struct {
	main    *collector
	writers []*exchange.RecordWriter
}

func (c *sideCollector) Collect(r sdk.Record) {
	if c.main.err != nil {
		return
	}
	c.main.count++
	for _, w := range c.writers {
		if err := w.Emit(r); err != nil {
			c.main.err = err
			return
		}
	}
}

// discard is a side output no downstream vertex reads.
type discard struct{}

func (discard) Collect(sdk.Record) {}
