package ops

import (
	"errors"
	"fmt"

	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// Join is the operator sql-join (a plan.Join): the runtime's interval
// join, window join or hash join (a regular join), keyed by the equality
// columns, pairing rows with a SQL pairer. A pair's row is the left row's
// columns then the right row's; the pairer drops the pairs the rest of
// the join condition (Filter) rejects and emits the projection of the
// others. A regular join of a changelog input, an outer one or one with a
// state TTL runs on regularJoin instead, which emits a changelog.
type Join struct {
	op joinOperator

	left, right *row.Codec
	l, r, pair  row.Row
	filter      func(row.Row) (bool, error)
	project     *projection
	enc         *encoder
}

// joinOperator is what the runtime's joins are.
type joinOperator interface {
	sdk.Operator
	sdk.MultiInputOperator
}

func (j *Join) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-join")
	if err != nil {
		return err
	}
	if op.Join == nil {
		return errors.New("sql-join: the plan is not a join's")
	}
	if err := j.open(op.Join); err != nil {
		return fmt.Errorf("sql-join: %w", err)
	}
	return j.op.Open(ctx)
}

func (j *Join) open(p *plan.Join) error {
	switch p.Kind {
	case plan.IntervalJoin:
		if p.Lower > p.Upper {
			return fmt.Errorf("interval join of lower bound %dms above its upper bound %dms", p.Lower, p.Upper)
		}
		j.op = &operators.IntervalJoin{Spec: &window.IntervalJoinSpec{Lower: p.Lower, Upper: p.Upper}, Pair: j.pairRows}
	case plan.WindowJoin:
		if p.Size <= 0 {
			return fmt.Errorf("window join of size %dms: want a positive size", p.Size)
		}
		j.op = &operators.WindowJoin{Spec: &window.WindowJoinSpec{Size: p.Size}, Pair: j.pairRows}
	case plan.RegularJoin:
		if !usesRegularJoin(p) {
			// An append-only inner join without a TTL: the runtime's hash
			// join, whose state savepoints hold.
			j.op = &operators.HashJoin{Pair: j.pairRows}
			break
		}
		rj, err := newRegularJoin(j, p)
		if err != nil {
			return err
		}
		j.op = rj
	default:
		return fmt.Errorf("unknown join kind %q", p.Kind)
	}
	if len(p.Project) != len(p.Out) {
		return fmt.Errorf("%d projected columns for an output of %d", len(p.Project), len(p.Out))
	}
	j.left, j.right = row.NewCodec(p.Left), row.NewCodec(p.Right)
	j.pair = make(row.Row, len(p.Left)+len(p.Right))
	var err error
	if j.filter, err = predicate(p.Filter); err != nil {
		return err
	}
	if j.project, err = newProjection(p.Project); err != nil {
		return err
	}
	j.enc, err = newEncoder(p.Out, p.Enc)
	return err
}

// pairRows is the join's operators.Pairer.
func (j *Join) pairRows(_, lv, rv []byte, ts int64) (sdk.Record, error) {
	var err error
	if j.l, err = j.left.Decode(lv, j.l); err != nil {
		return sdk.Record{}, fmt.Errorf("left row: %w", err)
	}
	if j.r, err = j.right.Decode(rv, j.r); err != nil {
		return sdk.Record{}, fmt.Errorf("right row: %w", err)
	}
	copy(j.pair[copy(j.pair, j.l):], j.r)
	if j.filter != nil {
		keep, err := j.filter(j.pair)
		if err != nil {
			return sdk.Record{}, fmt.Errorf("join condition: %w", err)
		}
		if !keep {
			return sdk.Record{}, operators.SkipPair
		}
	}
	out, err := j.project.apply(j.pair)
	if err != nil {
		return sdk.Record{}, err
	}
	return j.enc.record(out, ts), nil
}

func (j *Join) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	return j.op.ProcessRecord(r, out)
}

func (j *Join) ProcessInput(input int, r sdk.Record, out sdk.Collector) error {
	return j.op.ProcessInput(input, r, out)
}

// OnTimer is the interval and window joins' clean-up and firing, and a
// regular join's state TTL; the hash join sets no timers.
func (j *Join) OnTimer(t sdk.Timer, out sdk.Collector) error {
	h, ok := j.op.(sdk.TimerHandler)
	if !ok {
		return errors.New("sql-join: a timer fired for a regular join, which sets none")
	}
	return h.OnTimer(t, out)
}

// PrepareSnapshotPreBarrier is the regular join's (of a changelog, outer
// or with a TTL): what its encoder holds back goes before the barrier.
// The other joins hold nothing back.
func (j *Join) PrepareSnapshotPreBarrier(id int64, out sdk.Collector) error {
	if h, ok := j.op.(sdk.PreBarrierHook); ok {
		return h.PrepareSnapshotPreBarrier(id, out)
	}
	return nil
}

// EndInput is the regular join's (of a changelog, outer or with a TTL),
// as PrepareSnapshotPreBarrier.
func (j *Join) EndInput(out sdk.Collector) error {
	if e, ok := j.op.(sdk.InputEnder); ok {
		return e.EndInput(out)
	}
	return nil
}

func (j *Join) Close() error { return j.op.Close() }
