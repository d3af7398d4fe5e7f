package ops

import (
	"errors"
	"fmt"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// Calc is the operator sql-calc (a plan.Calc): a projection and a filter,
// stateless. It decodes each input record into a row, keeps the rows its
// filter is true for, and emits the projection of each in its encoding,
// at the record's timestamp (or at the row's event-time column's, for a
// source's records that do not carry it).
type Calc struct {
	decode  decoder
	filter  func(row.Row) (bool, error)
	project *projection
	enc     *encoder
	// tsCol is the event-time column, or -1.
	tsCol int
	in    row.Row
	// shared computes the plan's shared expressions, which wide is the
	// row with (the decoded row, then their values).
	shared *projection
	wide   row.Row
	// changelog: the input records carry row kinds.
	changelog bool
	// upsertKey decodes an upsert source's message key into the key's
	// columns, which keyAt places in the row of width columns.
	upsertKey decoder
	keyAt     []int
	keyRow    row.Row
	width     int
}

func (c *Calc) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-calc")
	if err != nil {
		return err
	}
	p := op.Calc
	if p == nil {
		return errors.New("sql-calc: the plan is not a calc's")
	}
	if err := c.open(p, ctx.TimerService); err != nil {
		return fmt.Errorf("sql-calc: %w", err)
	}
	return nil
}

// open compiles p; timers is how to reach the subtask's clock, asked for
// only when a column needs it.
func (c *Calc) open(p *plan.Calc, timers func() sdk.TimerService) error {
	s := p.In.Schema
	c.tsCol = p.In.Timestamp
	c.changelog = p.In.Changelog
	if len(p.In.Key) > 0 {
		var ks plan.Schema
		for _, k := range p.In.Key {
			if k < 0 || k >= len(s) {
				return fmt.Errorf("key column %d of an input of %d columns", k, len(s))
			}
			ks = append(ks, s[k])
		}
		if p.Filter != nil || len(p.Project) > 0 || len(p.Shared) > 0 {
			return errors.New("an upsert source's rows are normalized before they are filtered or projected")
		}
		c.upsertKey = newTextDecoder(plan.Decoding{Format: p.In.KeyFormat, Schema: ks, Timestamp: -1}, nil)
		c.keyAt, c.width = p.In.Key, len(s)
	}
	if c.changelog && p.In.Format != plan.FormatRow {
		return fmt.Errorf("a changelog input in format %q: changelogs between operators are rows", p.In.Format)
	}
	if c.tsCol >= len(s) {
		return fmt.Errorf("event-time column %d of an input of %d columns", c.tsCol, len(s))
	}
	if c.tsCol >= 0 && s[c.tsCol].Type.Kind != plan.Timestamp && s[c.tsCol].Type.Kind != plan.TimestampTZ {
		return fmt.Errorf("event-time column %s is %s, not a TIMESTAMP", s[c.tsCol].Name, s[c.tsCol].Type)
	}
	used := make([]bool, len(s))
	if c.tsCol >= 0 {
		used[c.tsCol] = true
	}
	if p.Filter != nil {
		markColumns(used, *p.Filter)
	}
	for _, e := range p.Shared {
		markColumns(used, e)
	}
	out := s
	if len(p.Project) > 0 {
		out = p.Out
		for _, e := range p.Project {
			markColumns(used, e)
		}
	} else {
		for i := range used {
			used[i] = true
		}
	}
	if len(out) != len(p.Out) {
		return fmt.Errorf("the output has %d columns, the plan's schema %d", len(out), len(p.Out))
	}
	var clock sdk.TimerService
	now := func() int64 {
		if clock == nil {
			clock = timers()
		}
		return clock.CurrentProcessingTime()
	}
	var err error
	if c.decode, err = newDecoder(p.In, used, now); err != nil {
		return err
	}
	if len(p.Shared) > 0 {
		if c.shared, err = newProjection(p.Shared); err != nil {
			return fmt.Errorf("shared expressions: %w", err)
		}
	}
	if c.filter, err = predicate(p.Filter); err != nil {
		return err
	}
	if c.project, err = newProjection(p.Project); err != nil {
		return err
	}
	c.enc, err = newEncoder(p.Out, p.Enc)
	return err
}

// markColumns marks the columns e reads.
func markColumns(used []bool, e plan.Expr) {
	if e.Op == plan.OpCol && e.Col >= 0 && e.Col < len(used) {
		used[e.Col] = true
	}
	for _, a := range e.Args {
		markColumns(used, a)
	}
}

func (c *Calc) ProcessRecord(rec sdk.Record, out sdk.Collector) error {
	kind := row.Insert
	if c.changelog {
		var err error
		if kind, rec.Value, err = row.SplitKind(rec.Value); err != nil {
			return fmt.Errorf("sql-calc: %w", err)
		}
	}
	if c.upsertKey != nil {
		if len(rec.Value) == 0 {
			// A tombstone: the key's deletion, its columns from the
			// message key.
			var err error
			if c.keyRow, _, err = c.upsertKey(sdk.Record{Value: rec.Key}, c.keyRow); err != nil {
				return fmt.Errorf("sql-calc: decode the key of a tombstone: %w", err)
			}
			if cap(c.in) < c.width {
				c.in = make(row.Row, c.width)
			}
			c.in = c.in[:c.width]
			clear(c.in)
			for j, i := range c.keyAt {
				c.in[i] = c.keyRow[j]
			}
			c.enc.emit(out, row.Delete, c.in, rec.Timestamp)
			return nil
		}
		kind = row.UpdateAfter
	}
	r, ok, err := c.decode(rec, c.in)
	c.in = r
	if err != nil {
		return fmt.Errorf("sql-calc: decode: %w", err)
	}
	if !ok {
		return nil
	}
	ts := rec.Timestamp
	if c.tsCol >= 0 {
		r[c.tsCol] = row.Int(ts * 1000)
	}
	if c.shared != nil {
		vals, err := c.shared.apply(r)
		if err != nil {
			return fmt.Errorf("sql-calc: %w", err)
		}
		c.wide = append(append(c.wide[:0], r...), vals...)
		r = c.wide
	}
	if c.filter != nil {
		keep, err := c.filter(r)
		if err != nil {
			return fmt.Errorf("sql-calc: filter: %w", err)
		}
		if !keep {
			return nil
		}
	}
	if r, err = c.project.apply(r); err != nil {
		return fmt.Errorf("sql-calc: %w", err)
	}
	c.enc.emit(out, kind, r, ts)
	return nil
}

// PrepareSnapshotPreBarrier writes what the encoder holds back, so that
// no change straddles a checkpoint.
func (c *Calc) PrepareSnapshotPreBarrier(_ int64, out sdk.Collector) error {
	c.enc.flush(out)
	return nil
}

func (c *Calc) EndInput(out sdk.Collector) error {
	c.enc.flush(out)
	return nil
}

func (c *Calc) Close() error { return nil }
