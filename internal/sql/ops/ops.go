// Package ops holds the SQL operators a TaskManager runs: each reads its
// part of a compiled query (a plan.Operator, JSON under its vertex's
// configuration key "plan", which `weir sql` writes), compiles its
// expressions once into closures (package sql/expr), and runs on the
// runtime's own operators: a window aggregate is the window operator of
// the Go API and the job specs with a SQL aggregator, an interval or
// window join theirs with a SQL pairer. It links no SQL parser: the
// planner is apart, in package sql/compile.
package ops

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/weirproject/weir/internal/sql/expr"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// loadPlan reads the plan of the vertex operator name runs.
func loadPlan(ctx sdk.Context, name string) (*plan.Operator, error) {
	s, err := ctx.Config().String("plan", "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if s == "" {
		return nil, fmt.Errorf("%s: config \"plan\" is required (the operator's part of a query `weir sql` compiled)", name)
	}
	op, err := plan.Unmarshal(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return op, nil
}

// projection computes an output row from an input row: nil evals pass the
// input row through.
type projection struct {
	evals []expr.Eval
	out   row.Row
}

func newProjection(exprs []plan.Expr) (*projection, error) {
	p := &projection{}
	for i, e := range exprs {
		ev, err := expr.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("output column %d: %w", i, err)
		}
		p.evals = append(p.evals, ev)
	}
	p.out = make(row.Row, len(p.evals))
	return p, nil
}

// apply returns the projection of r, in a row reused by the next call.
func (p *projection) apply(r row.Row) (row.Row, error) {
	if p.evals == nil {
		return r, nil
	}
	for i, ev := range p.evals {
		v, err := ev(r)
		if err != nil {
			return nil, fmt.Errorf("output column %d: %w", i, err)
		}
		p.out[i] = v
	}
	return p.out, nil
}

// predicate compiles an optional filter; nil keeps every row.
func predicate(e *plan.Expr) (func(row.Row) (bool, error), error) {
	if e == nil {
		return nil, nil
	}
	f, err := expr.CompilePredicate(*e)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return f, nil
}

// encoder makes the records an operator emits from its output rows, as
// its plan.Encoding says.
type encoder struct {
	schema plan.Schema
	enc    plan.Encoding
	codec  *row.Codec
	// keySchema and keyRow are the key columns' for a text key.
	keySchema plan.Schema
	keyRow    row.Row
	arena     arena
	// pending is the key of an upsert output's -U, held until the next
	// change says whether its +U follows.
	pending   []byte
	pendingTs int64
	// wide and withKind are a kind-column output's codec and row.
	wide     *row.Codec
	withKind row.Row
}

func newEncoder(s plan.Schema, e plan.Encoding) (*encoder, error) {
	switch e.Format {
	case plan.FormatRow, plan.FormatCSV, plan.FormatJSON:
	default:
		return nil, fmt.Errorf("output format %q: want %s, %s or %s", e.Format, plan.FormatRow, plan.FormatCSV, plan.FormatJSON)
	}
	switch e.KeyFormat {
	case "", plan.FormatRow, plan.FormatCSV, plan.FormatJSON:
	default:
		return nil, fmt.Errorf("key format %q: want %s, %s or %s", e.KeyFormat, plan.FormatRow, plan.FormatCSV, plan.FormatJSON)
	}
	switch e.Sink {
	case "", plan.SinkForceAppend, plan.SinkDebezium, plan.SinkKindColumn:
	case plan.SinkUpsert:
		if len(e.Key) == 0 {
			return nil, errors.New("an upsert output needs a key")
		}
	default:
		return nil, fmt.Errorf("sink mode %q: want %s, %s or %s", e.Sink, plan.SinkForceAppend, plan.SinkUpsert, plan.SinkDebezium)
	}
	if e.Changelog && (e.Format != plan.FormatRow || e.Sink != "") {
		return nil, errors.New("a changelog output between operators is in the row format")
	}
	if e.Sink == plan.SinkDebezium && e.Format != plan.FormatJSON {
		return nil, errors.New("a Debezium output is JSON")
	}
	c := &encoder{schema: s, enc: e, codec: row.NewCodec(s)}
	if e.Sink == plan.SinkKindColumn {
		if e.Format != plan.FormatRow || len(e.Key) > 0 {
			return nil, errors.New("a changelog with its kinds as a column is in the row format, unkeyed")
		}
		c.wide = row.NewCodec(append(plan.Schema{{Name: "op", Type: plan.Type{Kind: plan.Varchar}}}, s...))
	}
	for _, k := range e.Key {
		if k < 0 || k >= len(s) {
			return nil, fmt.Errorf("key column %d of an output of %d columns", k, len(s))
		}
		c.keySchema = append(c.keySchema, s[k])
	}
	c.keyRow = make(row.Row, len(e.Key))
	return c, nil
}

// emit writes the change kind of row r at ts, as the encoding says: the
// record of a changelog between operators, or of a sink's mode. An
// append-only output (no Changelog, no Sink) takes inserts only.
func (c *encoder) emit(out sdk.Collector, kind row.Kind, r row.Row, ts int64) {
	switch {
	case c.enc.Changelog:
		out.Collect(c.recordKind(kind, r, ts))
		return
	case c.enc.Sink == plan.SinkForceAppend:
		if kind.Adds() {
			out.Collect(c.record(r, ts))
		}
		return
	case c.enc.Sink == plan.SinkDebezium:
		out.Collect(c.debezium(kind, r, ts))
		return
	case c.enc.Sink == plan.SinkUpsert:
		c.upsert(out, kind, r, ts)
		return
	case c.enc.Sink == plan.SinkKindColumn:
		c.withKind = append(append(c.withKind[:0], row.Str(kind.String())), r...)
		out.Collect(sdk.Record{Value: c.arena.keep(c.wide.Append(c.arena.next(), c.withKind)), Timestamp: ts})
		return
	}
	out.Collect(c.record(r, ts))
}

// flush writes what emit holds back (an upsert output's -U waiting for
// its +U): before a checkpoint barrier and at the end of the input.
func (c *encoder) flush(out sdk.Collector) {
	if c.pending != nil {
		out.Collect(sdk.Record{Key: c.pending, Timestamp: c.pendingTs})
		c.pending = nil
	}
}

// upsert writes a change to an upsert output: a -U is held until the next
// change, which is its +U (of the same key: drop it, the +U overwrites)
// or not (then the key's row is gone: a tombstone).
func (c *encoder) upsert(out sdk.Collector, kind row.Kind, r row.Row, ts int64) {
	rec := c.record(r, ts)
	if c.pending != nil {
		if kind != row.UpdateAfter || !bytes.Equal(c.pending, rec.Key) {
			out.Collect(sdk.Record{Key: c.pending, Timestamp: c.pendingTs})
		}
		c.pending = nil
	}
	switch kind {
	case row.UpdateBefore:
		c.pending, c.pendingTs = rec.Key, ts
	case row.Delete:
		out.Collect(sdk.Record{Key: rec.Key, Timestamp: ts})
	default:
		if len(rec.Value) == 0 {
			// An empty value is a tombstone. Only CSV encodes a row to
			// nothing, a row of one NULL column (SELECT DISTINCT of a
			// nullable column): a blank line, which CSV reads as it.
			rec.Value = c.arena.keep(append(c.arena.next(), '\n'))
		}
		out.Collect(rec)
	}
}

// recordKind is the changelog record of r: its kind's byte, then the row.
func (c *encoder) recordKind(kind row.Kind, r row.Row, ts int64) sdk.Record {
	key := c.key(r)
	b := append(c.arena.next(), byte(kind))
	return sdk.Record{Key: key, Value: c.arena.keep(c.codec.Append(b, r)), Timestamp: ts}
}

// debezium is r's Debezium JSON envelope.
func (c *encoder) debezium(kind row.Kind, r row.Row, ts int64) sdk.Record {
	rec := sdk.Record{Key: c.key(r), Timestamp: ts}
	b := c.arena.next()
	if kind.Adds() {
		b = append(b, `{"before":null,"after":`...)
		b = row.AppendJSON(b, c.schema, r)
		b = append(b, `,"op":"c"}`...)
	} else {
		b = append(b, `{"before":`...)
		b = row.AppendJSON(b, c.schema, r)
		b = append(b, `,"after":null,"op":"d"}`...)
	}
	rec.Value = c.arena.keep(b)
	return rec
}

// key is r's record key in the encoding's key format, nil when the
// encoding has no key columns.
func (c *encoder) key(r row.Row) []byte {
	if len(c.enc.Key) == 0 {
		return nil
	}
	b := c.arena.next()
	switch c.enc.KeyFormat {
	case plan.FormatCSV, plan.FormatJSON:
		for i, k := range c.enc.Key {
			c.keyRow[i] = r[k]
		}
		if c.enc.KeyFormat == plan.FormatCSV {
			b = row.AppendCSV(b, c.keySchema, c.keyRow)
		} else {
			b = row.AppendJSON(b, c.keySchema, c.keyRow)
		}
	default:
		b = c.codec.AppendKey(b, r, c.enc.Key)
	}
	return c.arena.keep(b)
}

// record is r's record at ts. Its bytes are the arena's: downstream may
// hold them for a while (the exchange batches records, a chained operator
// may buffer them), so they are never written again.
func (c *encoder) record(r row.Row, ts int64) sdk.Record {
	key := c.key(r)
	b := c.arena.next()
	switch c.enc.Format {
	case plan.FormatCSV:
		b = row.AppendCSV(b, c.schema, r)
	case plan.FormatJSON:
		b = row.AppendJSON(b, c.schema, r)
	default:
		b = c.codec.Append(b, r)
	}
	return sdk.Record{Key: key, Value: c.arena.keep(b), Timestamp: ts}
}

// arena hands out the bytes of emitted records from large chunks: one
// allocation serves many records, and none is ever overwritten (the
// runtime's contract: an emitted record's slices are downstream's).
type arena struct {
	// free is the unused rest of the current chunk.
	free []byte
	// last is the length of the last record's bytes, the room the next
	// one is likely to need.
	last int
}

const arenaChunk = 16 << 10

// next is an empty slice to append one record's bytes to; keep takes
// them.
func (a *arena) next() []byte {
	if need := 2*a.last + 16; cap(a.free) < need {
		a.free = make([]byte, 0, max(arenaChunk, need))
	}
	return a.free[:0]
}

// keep returns b, which next's slice grew into, capped (so that nothing
// appended to it overwrites the next record); the chunk's room after b is
// the next record's. When b outgrew the chunk, append moved it to an
// allocation of its own and the chunk is left as it was.
func (a *arena) keep(b []byte) []byte {
	a.last = len(b)
	if len(b) > 0 && cap(b) == cap(a.free) && &b[0] == &a.free[:1][0] {
		a.free = a.free[len(b):len(b)]
	}
	return b[:len(b):len(b)]
}
