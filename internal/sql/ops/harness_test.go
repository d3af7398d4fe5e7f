package ops

import (
	"strconv"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/internal/timer"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Types and expressions the tests' plans use.
var (
	tBool    = plan.Type{Kind: plan.Bool}
	tInt     = plan.Type{Kind: plan.Int32}
	tBigint  = plan.Type{Kind: plan.Int64}
	tDouble  = plan.Type{Kind: plan.Float64}
	tVarchar = plan.Type{Kind: plan.Varchar}
	tTime    = plan.Type{Kind: plan.Timestamp}
	tTimeTZ  = plan.Type{Kind: plan.TimestampTZ}
)

func tNumeric(scale int8) plan.Type { return plan.Type{Kind: plan.Decimal, Scale: scale} }

func lit(t plan.Type, s string) plan.Expr { return plan.Expr{Op: plan.OpConst, Type: t, Lit: s} }

func col(i int, t plan.Type) plan.Expr { return plan.ColRef(i, t) }

func cmp(op string, a, b plan.Expr) *plan.Expr {
	e := plan.Call(op, tBool, a, b)
	return &e
}

func schema(cols ...any) plan.Schema {
	var s plan.Schema
	for i := 0; i < len(cols); i += 2 {
		s = append(s, plan.Column{Name: cols[i].(string), Type: cols[i+1].(plan.Type)})
	}
	return s
}

// config is the vertex configuration of op, as the planner writes it.
func config(t testing.TB, op *plan.Operator) sdk.Config {
	t.Helper()
	s, err := plan.Marshal(op)
	if err != nil {
		t.Fatal(err)
	}
	return sdk.Config{"plan": s}
}

// timers is the sdk.TimerService of a subtask: a real timer service over
// the subtask's heap, with the watermark and clock the test sets.
type timers struct {
	svc   *timer.Service
	key   []byte
	wm    int64
	nowMs int64
}

func (s *timers) CurrentWatermark() int64      { return s.wm }
func (s *timers) CurrentProcessingTime() int64 { return s.nowMs }
func (s *timers) RegisterEventTimeTimer(ns []byte, ts int64) {
	s.svc.Register(timer.EventTime, s.key, ns, ts)
}
func (s *timers) RegisterProcessingTimeTimer(ns []byte, ts int64) {
	s.svc.Register(timer.ProcessingTime, s.key, ns, ts)
}
func (s *timers) DeleteEventTimeTimer(ns []byte, ts int64) {
	s.svc.Delete(timer.EventTime, s.key, ns, ts)
}
func (s *timers) DeleteProcessingTimeTimer(ns []byte, ts int64) {
	s.svc.Delete(timer.ProcessingTime, s.key, ns, ts)
}

// subtask runs an operator the way the task does: records with their
// key's state (through ProcessInput for a join), timers fired in order
// when the watermark or the clock passes them.
type subtask struct {
	t      testing.TB
	ctx    *sdktest.Context
	op     sdk.Operator
	timers *timers
	out    []sdk.Record
	late   collector
}

type collector struct{ records []sdk.Record }

func (c *collector) Collect(r sdk.Record) { c.records = append(c.records, r) }

func (s *subtask) Collect(r sdk.Record) { s.out = append(s.out, r) }

// newSubtask opens op as subtask i of parallelism, or restored into ctx.
func newSubtask(t testing.TB, op sdk.Operator, cfg sdk.Config, i, parallelism int, ctx *sdktest.Context) *subtask {
	t.Helper()
	if ctx == nil {
		ctx = sdktest.NewContext("sql", cfg, i, parallelism)
	}
	s := &subtask{t: t, ctx: ctx, op: op}
	s.timers = &timers{svc: timer.New(ctx.Heap), wm: sdk.MinWatermark}
	if err := s.timers.svc.Restore(); err != nil {
		t.Fatalf("restore timers: %v", err)
	}
	ctx.Timers = s.timers
	ctx.Outputs = map[string]sdk.Collector{sdk.LateOutput: &s.late}
	if err := op.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// process hands r to the operator, from input (-1: ProcessRecord).
func (s *subtask) process(input int, r sdk.Record) error {
	s.ctx.Heap.SetCurrentKey(r.Key)
	s.timers.key = r.Key
	if input < 0 {
		return s.op.ProcessRecord(r, s)
	}
	return s.op.(sdk.MultiInputOperator).ProcessInput(input, r, s)
}

func (s *subtask) record(input int, r sdk.Record) {
	s.t.Helper()
	if err := s.process(input, r); err != nil {
		s.t.Fatalf("process %q@%d: %v", r.Key, r.Timestamp, err)
	}
}

func (s *subtask) fire(d timer.Domain, upTo int64) {
	s.t.Helper()
	for {
		tm, ok := s.timers.svc.Pop(d, upTo)
		if !ok {
			return
		}
		s.timers.key = tm.Key
		s.ctx.Heap.SetCurrentKey(tm.Key)
		err := s.op.(sdk.TimerHandler).OnTimer(sdk.Timer{Domain: sdk.TimeDomain(d), Timestamp: tm.Timestamp, Key: tm.Key, Namespace: tm.Namespace}, s)
		if err != nil {
			s.t.Fatalf("timer %v: %v", tm, err)
		}
	}
}

func (s *subtask) watermark(wm int64) {
	s.t.Helper()
	if wm <= s.timers.wm {
		return
	}
	s.timers.wm = wm
	s.fire(timer.EventTime, wm)
}

func (s *subtask) clock(ms int64) {
	s.t.Helper()
	s.timers.nowMs = ms
	s.fire(timer.ProcessingTime, ms)
}

func (s *subtask) take() []sdk.Record {
	r := s.out
	s.out = nil
	return r
}

// checkpoint snapshots every subtask as checkpoint id.
func checkpoint(t testing.TB, subs []*subtask, root string, id int64) []*weirv1.SubtaskState {
	t.Helper()
	var states []*weirv1.SubtaskState
	for _, s := range subs {
		states = append(states, s.ctx.Checkpoint(t, s.op, root, id))
	}
	return states
}

// rowRecord is the record an upstream SQL operator emits for r: keyed by
// the row encoding of its key columns.
func rowRecord(s plan.Schema, r row.Row, key []int, ts int64) sdk.Record {
	c := row.NewCodec(s)
	rec := sdk.Record{Value: c.Append(nil, r), Timestamp: ts}
	if len(key) > 0 {
		rec.Key = c.AppendKey(nil, r, key)
	}
	return rec
}

// csvLines are the records' values, CSV rows, with their timestamps:
// "<ts>: <value>".
func csvLines(recs []sdk.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, strconv.FormatInt(r.Timestamp, 10)+": "+string(r.Value))
	}
	return out
}

// newSubtaskContext is a context to open an operator in that fails.
func newSubtaskContext(cfg sdk.Config) *sdktest.Context {
	ctx := sdktest.NewContext("sql", cfg, 0, 1)
	ctx.Timers = &timers{}
	return ctx
}

// event is one step of a run: a record from input (-1: ProcessRecord),
// or, with wm or clock set, the watermark or the clock moving there.
type event struct {
	input     int
	rec       sdk.Record
	wm, clock int64
}

func rec(r sdk.Record) event             { return event{input: -1, rec: r} }
func recFrom(in int, r sdk.Record) event { return event{input: in, rec: r} }
func wm(ts int64) event                  { return event{wm: ts} }
func clock(ms int64) event               { return event{clock: ms} }

// deliver hands e to subs: a watermark or the clock to each, a record to
// the subtask its key's group belongs to.
func deliver(subs []*subtask, e event) {
	switch {
	case e.wm != 0:
		for _, s := range subs {
			s.watermark(e.wm)
		}
	case e.clock != 0:
		for _, s := range subs {
			s.clock(e.clock)
		}
	default:
		kg := keygroup.Of(e.rec.Key, sdktest.MaxParallelism)
		subs[keygroup.OperatorIndex(kg, sdktest.MaxParallelism, len(subs))].record(e.input, e.rec)
	}
}

// run drives the operator newOp makes through events at parallelism 1,
// each record on the subtask its key's group belongs to; after event
// restoreAfter (-1: never) it checkpoints, drops the subtasks and
// restores at parallelism 3. It ends with the end of event time, and
// returns what every subtask emitted.
func run(t testing.TB, newOp func() sdk.Operator, cfg sdk.Config, events []event, restoreAfter int) []sdk.Record {
	t.Helper()
	subs := []*subtask{newSubtask(t, newOp(), cfg, 0, 1, nil)}
	var out []sdk.Record
	root := t.TempDir()
	for i, e := range events {
		deliver(subs, e)
		if i != restoreAfter {
			continue
		}
		states := checkpoint(t, subs, root, 1)
		restored := make([]*subtask, 3)
		for j := range restored {
			ctx := sdktest.Restore(t, "sql", cfg, j, len(restored), 1, 1, states)
			restored[j] = newSubtask(t, newOp(), cfg, j, len(restored), ctx)
			// The watermark and clock go on from where they were.
			restored[j].watermark(subs[0].timers.wm)
			restored[j].timers.nowMs = subs[0].timers.nowMs
		}
		for _, s := range subs {
			out = append(out, s.take()...)
		}
		subs = restored
	}
	for _, s := range subs {
		s.watermark(sdk.MaxWatermark)
		out = append(out, s.take()...)
		if n := len(s.late.records); n > 0 {
			t.Fatalf("%d records late", n)
		}
	}
	return out
}
