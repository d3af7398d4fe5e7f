package ops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// Normalize is the operator sql-normalize (a plan.Normalize): an upsert
// source's stream, where a record is its key's latest row (+U) or its
// deletion (-D with only the key), becomes a retract stream whose -U and
// -D carry the whole row they take back (Flink's ChangelogNormalize). Its
// input is keyed by the primary key, so its state is the latest row of
// each key. A row equal to the one kept emits nothing: an upsert topic
// read again after a restore, or compacted, repeats rows.
type Normalize struct {
	latest sdk.ValueState
	// touched is the last access per key, and the cleanup timer pending,
	// with a TTL.
	touched sdk.ValueState
	timers  sdk.TimerService
	ttl     int64
	codec   *row.Codec
	enc     *encoder
	r       row.Row
	buf     []byte
}

func (n *Normalize) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-normalize")
	if err != nil {
		return err
	}
	p := op.Normalize
	if p == nil {
		return errors.New("sql-normalize: the plan is not a normalize's")
	}
	if len(p.Key) == 0 {
		return errors.New("sql-normalize: a normalize needs the primary key")
	}
	n.codec, n.ttl = row.NewCodec(p.In), p.TTL
	if n.enc, err = newEncoder(p.In, p.Enc); err != nil {
		return fmt.Errorf("sql-normalize: %w", err)
	}
	n.latest = ctx.ValueState("latest")
	if n.ttl > 0 {
		n.touched, n.timers = ctx.ValueState("touched"), ctx.TimerService()
	}
	return nil
}

func (n *Normalize) ProcessRecord(rec sdk.Record, out sdk.Collector) error {
	kind, v, err := row.SplitKind(rec.Value)
	if err != nil {
		return fmt.Errorf("sql-normalize: %w", err)
	}
	old, had := n.latest.Value()
	switch {
	case kind.Adds():
		if had && bytes.Equal(old, v) {
			break
		}
		if had {
			if err := n.emit(out, row.UpdateBefore, old, rec.Timestamp); err != nil {
				return err
			}
			kind = row.UpdateAfter
		} else {
			kind = row.Insert
		}
		if err := n.emit(out, kind, v, rec.Timestamp); err != nil {
			return err
		}
		n.latest.Update(v)
	case had:
		// A deletion carries the key alone: the row it takes back is
		// the one kept.
		if err := n.emit(out, row.Delete, old, rec.Timestamp); err != nil {
			return err
		}
		n.latest.Clear()
	}
	if n.ttl > 0 {
		n.touch()
	}
	return nil
}

func (n *Normalize) emit(out sdk.Collector, kind row.Kind, v []byte, ts int64) error {
	var err error
	if n.r, err = n.codec.Decode(v, n.r); err != nil {
		return fmt.Errorf("sql-normalize: %w", err)
	}
	n.enc.emit(out, kind, n.r, ts)
	return nil
}

// touch records an access of the current key and keeps one cleanup timer
// pending for it: at the last access + TTL, re-armed when it fires early.
func (n *Normalize) touch() {
	now := n.timers.CurrentProcessingTime()
	_, pending, _ := n.lastAccess()
	if pending == 0 {
		pending = now + n.ttl
		n.timers.RegisterProcessingTimeTimer(nil, pending)
	}
	n.buf = appendTouched(n.buf[:0], now, pending)
	n.touched.Update(n.buf)
}

func (n *Normalize) lastAccess() (last, pending int64, ok bool) {
	b, ok := n.touched.Value()
	if !ok {
		return 0, 0, false
	}
	last, pending, ok = parseTouched(b)
	return last, pending, ok
}

func (n *Normalize) OnTimer(t sdk.Timer, _ sdk.Collector) error {
	last, _, ok := n.lastAccess()
	if !ok {
		return nil
	}
	if t.Timestamp >= last+n.ttl {
		// Idle for the TTL: forgotten, with nothing emitted (Flink's
		// state TTL in SQL).
		n.latest.Clear()
		n.touched.Clear()
		return nil
	}
	next := last + n.ttl
	n.timers.RegisterProcessingTimeTimer(nil, next)
	n.buf = appendTouched(n.buf[:0], last, next)
	n.touched.Update(n.buf)
	return nil
}

func (n *Normalize) PrepareSnapshotPreBarrier(_ int64, out sdk.Collector) error {
	n.enc.flush(out)
	return nil
}

func (n *Normalize) EndInput(out sdk.Collector) error {
	n.enc.flush(out)
	return nil
}

func (n *Normalize) Close() error { return nil }

// appendTouched encodes a key's last access and its pending cleanup
// timer, two varints.
func appendTouched(dst []byte, last, pending int64) []byte {
	dst = binary.AppendVarint(dst, last)
	return binary.AppendVarint(dst, pending)
}

func parseTouched(b []byte) (last, pending int64, ok bool) {
	last, k := binary.Varint(b)
	if k <= 0 {
		return 0, 0, false
	}
	pending, m := binary.Varint(b[k:])
	return last, pending, m > 0 && k+m == len(b)
}
