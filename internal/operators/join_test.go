package operators

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/timer"
	"github.com/weirproject/weir/internal/window"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// joinOperator is what a joinSubtask drives.
type joinOperator interface {
	sdk.Operator
	sdk.MultiInputOperator
	sdk.TimerHandler
}

func newJoinOperator(t *testing.T, name string) joinOperator {
	t.Helper()
	switch name {
	case "interval-join":
		return &IntervalJoin{}
	case "window-join":
		return &WindowJoin{}
	}
	t.Fatalf("no join operator %q", name)
	return nil
}

// joinSubtask runs a two-input operator the way the task does: each
// record with its key's state through ProcessInput with its input's
// index, timers fired in order when the watermark passes them.
type joinSubtask struct {
	t         *testing.T
	ctx       *testCtx
	op        joinOperator
	timers    *testTimers
	out, late *collector
}

func newJoinSubtask(t *testing.T, operator string, cfg sdk.Config, subtask, parallelism int, ctx *testCtx) *joinSubtask {
	t.Helper()
	if ctx == nil {
		ctx = newTestCtx(operator, cfg, subtask, parallelism)
	}
	j := &joinSubtask{t: t, ctx: ctx, op: newJoinOperator(t, operator), out: &collector{}, late: &collector{}}
	j.timers = &testTimers{svc: timer.New(ctx.Heap), wm: sdk.MinWatermark}
	if err := j.timers.svc.Restore(); err != nil {
		t.Fatalf("restore timers: %v", err)
	}
	ctx.Timers = j.timers
	ctx.Outputs = map[string]sdk.Collector{sdk.LateOutput: j.late}
	if err := j.op.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	return j
}

func (j *joinSubtask) record(input int, key string, ts, v int64) {
	j.t.Helper()
	j.ctx.Heap.SetCurrentKey([]byte(key))
	j.timers.key = []byte(key)
	r := sdk.Record{Key: []byte(key), Value: []byte(strconv.FormatInt(v, 10)), Timestamp: ts}
	if err := j.op.ProcessInput(input, r, j.out); err != nil {
		j.t.Fatalf("process input %d %s@%d: %v", input, key, ts, err)
	}
}

func (j *joinSubtask) left(key string, ts, v int64)  { j.t.Helper(); j.record(leftInput, key, ts, v) }
func (j *joinSubtask) right(key string, ts, v int64) { j.t.Helper(); j.record(rightInput, key, ts, v) }

func (j *joinSubtask) watermark(wm int64) {
	j.t.Helper()
	if wm <= j.timers.wm {
		return
	}
	j.timers.wm = wm
	for {
		tm, ok := j.timers.svc.Pop(timer.EventTime, wm)
		if !ok {
			return
		}
		j.timers.key = tm.Key
		err := j.op.OnTimer(sdk.Timer{Domain: sdk.EventTime, Timestamp: tm.Timestamp, Key: tm.Key, Namespace: tm.Namespace}, j.out)
		if err != nil {
			j.t.Fatalf("timer %v: %v", tm, err)
		}
	}
}

// lines are the emitted records as file-sink writes them.
func joinLines(recs []sdk.Record) []string {
	lines := make([]string, len(recs))
	for i, r := range recs {
		lines[i] = string(r.Key) + "," + string(r.Value)
	}
	return lines
}

// joinStateEntries counts the buffered timestamps of both sides of every
// key of j.
func joinStateEntries(t *testing.T, j *joinSubtask) int {
	t.Helper()
	n := 0
	for _, name := range []string{"left", "right"} {
		if err := j.ctx.Heap.ScanMap(name, func(_, _, _ []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// joinCase is a join configuration with its batch result and the
// timestamp its output must carry.
type joinCase struct {
	name     string
	operator string
	cfg      sdk.Config
	batch    func(left, right []check.Record) map[string]int
	outTs    func(lts, rts int64) int64
}

func intervalCase(lower, upper string) joinCase {
	spec, err := window.ParseIntervalJoin(sdk.Config{"lower": lower, "upper": upper})
	if err != nil {
		panic(err)
	}
	return joinCase{
		name: "interval-" + lower + "-" + upper, operator: "interval-join", cfg: sdk.Config{"lower": lower, "upper": upper},
		batch: func(l, r []check.Record) map[string]int {
			return check.BatchIntervalJoin(l, r, spec.Lower, spec.Upper)
		},
		outTs: func(lts, rts int64) int64 { return max(lts, rts) },
	}
}

func windowJoinCase(size string) joinCase {
	spec, err := window.ParseWindowJoin(sdk.Config{"size": size})
	if err != nil {
		panic(err)
	}
	j := &WindowJoin{spec: spec}
	return joinCase{
		name: "window-" + size, operator: "window-join", cfg: sdk.Config{"size": size},
		batch: func(l, r []check.Record) map[string]int { return check.BatchWindowJoin(l, r, spec.Size) },
		outTs: func(lts, _ int64) int64 { return j.maxTimestamp(lts) },
	}
}

// TestJoinMatchesBatch runs both joins over records of both sides coming
// out of order (bounded by the watermark's out-of-orderness, so none is
// late), with checkpoints restored at other parallelisms on the way, and
// compares the pairs emitted with a batch join of the same records: every
// pair exactly once, with its timestamp.
func TestJoinMatchesBatch(t *testing.T) {
	for _, tc := range []joinCase{
		intervalCase("-5ms", "5ms"),
		intervalCase("0s", "10ms"),
		intervalCase("2ms", "8ms"),
		intervalCase("-12ms", "-3ms"),
		intervalCase("3ms", "3ms"),
		windowJoinCase("1ms"),
		windowJoinCase("7ms"),
		windowJoinCase("20ms"),
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(4) {
				runJoinAgainstBatch(t, tc, seed)
			}
		})
	}
}

func runJoinAgainstBatch(t *testing.T, tc joinCase, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	const n, jitter = 800, 6
	// Keys only one side has join nothing.
	keys := [2][]string{{"a", "b", "c", "l"}, {"a", "b", "c", "r"}}
	type event struct {
		input int
		rec   check.Record
	}
	events := make([]event, n)
	var sides [2][]check.Record
	ts := [2]map[int64]int64{{}, {}} // value → timestamp
	var gaps int64
	for i := range events {
		if i%80 == 0 {
			gaps += int64(rng.IntN(15))
		}
		in := rng.IntN(2)
		base := int64(i)/2 + gaps
		r := check.Record{Key: keys[in][rng.IntN(len(keys[in]))], Timestamp: base - int64(rng.IntN(jitter+1)), Value: int64(i)}
		events[i] = event{in, r}
		sides[in] = append(sides[in], r)
		ts[in][r.Value] = r.Timestamp
	}
	parallelism := 2
	subs := make([]*joinSubtask, parallelism)
	for i := range subs {
		subs[i] = newJoinSubtask(t, tc.operator, tc.cfg, i, parallelism, nil)
	}
	var lines []string
	collect := func() {
		for _, s := range subs {
			recs := s.out.take()
			for _, r := range recs {
				lv, rv, _ := strings.Cut(string(r.Value), "|")
				l, _ := strconv.ParseInt(lv, 10, 64)
				rr, _ := strconv.ParseInt(rv, 10, 64)
				if want := tc.outTs(ts[0][l], ts[1][rr]); r.Timestamp != want {
					t.Fatalf("seed %d: pair %s,%s has timestamp %d, want %d", seed, r.Key, r.Value, r.Timestamp, want)
				}
			}
			lines = append(lines, joinLines(recs)...)
			if len(s.late.records) > 0 {
				t.Fatalf("seed %d: %d records late with a watermark within the jitter", seed, len(s.late.records))
			}
		}
	}
	root := t.TempDir()
	maxTs := int64(math.MinInt64)
	var id int64
	for i, e := range events {
		kg := keygroup.Of([]byte(e.rec.Key), testMaxParallelism)
		sub := subs[keygroup.OperatorIndex(kg, testMaxParallelism, len(subs))]
		sub.record(e.input, e.rec.Key, e.rec.Timestamp, e.rec.Value)
		maxTs = max(maxTs, e.rec.Timestamp)
		if i%7 == 6 {
			for _, s := range subs {
				s.watermark(maxTs - jitter - 1)
			}
		}
		if i%200 == 199 {
			// Checkpoint, drop the subtasks, restore at another parallelism.
			collect()
			id++
			var prev []*weirv1.SubtaskState
			for _, s := range subs {
				prev = append(prev, s.ctx.Checkpoint(t, s.op, root, id))
			}
			wm := subs[0].timers.wm
			parallelism = 1 + (parallelism+rng.IntN(2))%3 // another of 1, 2, 3
			subs = make([]*joinSubtask, parallelism)
			for j := range subs {
				ctx := restoreTestCtx(t, tc.operator, tc.cfg, j, parallelism, int(id), id, prev)
				subs[j] = newJoinSubtask(t, tc.operator, tc.cfg, j, parallelism, ctx)
				// A restored subtask starts without a watermark; the next
				// one from upstream is at least the last.
				subs[j].watermark(wm)
			}
		}
	}
	for _, s := range subs {
		s.watermark(sdk.MaxWatermark)
	}
	collect()
	want := tc.batch(sides[0], sides[1])
	if len(want) < 50 {
		t.Fatalf("seed %d: only %d distinct pairs: the test joins too little to tell", seed, len(want))
	}
	if err := check.Joins(lines, want); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	for _, s := range subs {
		if n := s.timers.svc.Len(); n != 0 {
			t.Errorf("seed %d: %d timers left after the end of event time", seed, n)
		}
		if n := joinStateEntries(t, s); n != 0 {
			t.Errorf("seed %d: %d join state entries left after the end of event time", seed, n)
		}
	}
}

func TestIntervalJoinBounds(t *testing.T) {
	j := newJoinSubtask(t, "interval-join", sdk.Config{"lower": "-2ms", "upper": "5ms"}, 0, 1, nil)
	j.left("k", 10, 1)
	j.left("k", 10, 2) // same timestamp: both kept
	for _, rts := range []int64{7, 8, 15, 16} {
		j.right("k", rts, rts*100)
	}
	j.right("other", 10, 999)
	j.left("k", 30, 3) // joins nothing yet
	want := map[string]int{"k,1|800": 1, "k,2|800": 1, "k,1|1500": 1, "k,2|1500": 1}
	if err := check.Joins(joinLines(j.out.take()), want); err != nil {
		t.Fatal(err)
	}
	// A right record arriving before the left one it joins.
	j.right("k", 40, 4000)
	j.left("k", 35, 5)
	if err := check.Joins(joinLines(j.out.take()), map[string]int{"k,5|4000": 1}); err != nil {
		t.Fatal(err)
	}
}

func TestIntervalJoinLateAndCleanup(t *testing.T) {
	t.Run("kept until nothing to come joins", func(t *testing.T) {
		j := newJoinSubtask(t, "interval-join", sdk.Config{"lower": "-2ms", "upper": "5ms"}, 0, 1, nil)
		j.left("k", 10, 1)
		j.right("k", 20, 2)
		j.watermark(14)
		j.right("k", 15, 3) // on time, and l.ts + upper: joins
		if err := check.Joins(joinLines(j.out.take()), map[string]int{"k,1|3": 1}); err != nil {
			t.Fatal(err)
		}
		j.watermark(15)
		// The left record is gone: a right record up to 15 would be late.
		// The right records stay until 20 + 2 and 15 + 2.
		if n := joinStateEntries(t, j); n != 2 {
			t.Fatalf("%d state entries at watermark 15, want the 2 right ones", n)
		}
		j.left("k", 22, 4) // joins the right record at 20
		j.watermark(22)
		if n := joinStateEntries(t, j); n != 1 {
			t.Fatalf("%d state entries at watermark 22, want the left one at 22", n)
		}
		j.watermark(27)
		if n, timers := joinStateEntries(t, j), j.timers.svc.Len(); n != 0 || timers != 0 {
			t.Fatalf("%d state entries and %d timers at watermark 27, want none", n, timers)
		}
		if err := check.Joins(joinLines(j.out.take()), map[string]int{"k,4|2": 1}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("late records", func(t *testing.T) {
		j := newJoinSubtask(t, "interval-join", sdk.Config{"lower": "-2ms", "upper": "5ms"}, 0, 1, nil)
		j.left("k", 10, 1)
		j.watermark(12)
		j.right("k", 12, 2) // at the watermark: late, though it would join
		j.left("k", 3, 3)
		if len(j.out.records) != 0 || len(j.late.records) != 2 || j.late.records[0].Timestamp != 12 || j.late.records[1].Timestamp != 3 {
			t.Fatalf("out %v, late %v; want nothing out, the records at 12 and 3 late", j.out.records, j.late.records)
		}
		j.right("k", 13, 4) // on time
		if err := check.Joins(joinLines(j.out.take()), map[string]int{"k,1|4": 1}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("not buffered when nothing to come joins it", func(t *testing.T) {
		j := newJoinSubtask(t, "interval-join", sdk.Config{"lower": "-9ms", "upper": "-3ms"}, 0, 1, nil)
		j.right("k", 5, 1)
		j.watermark(8)
		j.left("k", 10, 2) // joins right records in [1, 7]; those to come are > 8
		if err := check.Joins(joinLines(j.out.take()), map[string]int{"k,2|1": 1}); err != nil {
			t.Fatal(err)
		}
		j.ctx.Heap.SetCurrentKey([]byte("k"))
		if !j.op.(*IntervalJoin).sides[leftInput].IsEmpty() {
			t.Fatal("a left record no future right record joins was buffered")
		}
	})
	t.Run("counted without a late output", func(t *testing.T) {
		j := newJoinSubtask(t, "interval-join", sdk.Config{"lower": "0s", "upper": "0s"}, 0, 1, nil)
		j.ctx.Outputs = nil
		j.watermark(20)
		j.left("k", 20, 1)
		j.right("k", 1, 1)
		if j.ctx.LateDropped != 2 {
			t.Fatalf("late dropped = %d, want 2", j.ctx.LateDropped)
		}
	})
}

func TestWindowJoinFiresAndLate(t *testing.T) {
	j := newJoinSubtask(t, "window-join", sdk.Config{"size": "10ms"}, 0, 1, nil)
	j.left("k", 0, 1)
	j.left("k", 9, 2)
	j.right("k", 5, 3)
	j.right("k", 5, 4)
	j.right("k", 10, 5) // next window
	j.left("only-left", 3, 6)
	j.right("k", -1, 7) // window [-10, 0)
	j.watermark(8)
	if len(j.out.records) != 0 {
		t.Fatalf("emitted %v before the window's end", j.out.records)
	}
	j.watermark(9)
	recs := j.out.take()
	want := map[string]int{"k,1|3": 1, "k,1|4": 1, "k,2|3": 1, "k,2|4": 1}
	if err := check.Joins(joinLines(recs), want); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Timestamp != 9 {
			t.Fatalf("pair %s has timestamp %d, want 9", r.Value, r.Timestamp)
		}
	}
	if n := joinStateEntries(t, j); n != 1 {
		t.Fatalf("%d state entries after [0,10) fired, want the right record at 10", n)
	}
	j.left("k", 7, 8)   // its window fired: late
	j.right("k", 9, 9)  // at the watermark: late
	j.left("k", 10, 10) // on time
	if len(j.late.records) != 2 {
		t.Fatalf("late = %v, want the records at 7 and 9", j.late.records)
	}
	j.watermark(sdk.MaxWatermark)
	if err := check.Joins(joinLines(j.out.take()), map[string]int{"k,10|5": 1}); err != nil {
		t.Fatal(err)
	}
	if n, timers := joinStateEntries(t, j), j.timers.svc.Len(); n != 0 || timers != 0 {
		t.Fatalf("%d state entries and %d timers at the end, want none", n, timers)
	}
}

// TestJoinExtremeTimestamps joins records at the ends of the int64 range,
// where the bounds and clean-up times would overflow: they join as
// anywhere else, and their state goes at the end of event time.
func TestJoinExtremeTimestamps(t *testing.T) {
	const hi, lo = math.MaxInt64, math.MinInt64
	t.Run("interval", func(t *testing.T) {
		j := newJoinSubtask(t, "interval-join", sdk.Config{"lower": "-10ms", "upper": "10ms"}, 0, 1, nil)
		j.left("k", hi-1, 1)
		j.right("k", hi, 2)
		j.right("k", hi-20, 3) // out of range
		j.left("k", lo+1, 4)
		j.right("k", lo, 5)
		j.right("k", hi, 6) // far from lo+1: the difference overflows
		j.left("k", lo, 7)
		want := map[string]int{"k,1|2": 1, "k,1|6": 1, "k,4|5": 1, "k,7|5": 1}
		if err := check.Joins(joinLines(j.out.take()), want); err != nil {
			t.Fatal(err)
		}
		j.watermark(0)
		j.watermark(sdk.MaxWatermark)
		if n, timers := joinStateEntries(t, j), j.timers.svc.Len(); n != 0 || timers != 0 {
			t.Fatalf("%d state entries and %d timers at the end, want none", n, timers)
		}
	})
	t.Run("interval saturated below", func(t *testing.T) {
		j := newJoinSubtask(t, "interval-join", sdk.Config{"lower": "-10ms", "upper": "-5ms"}, 0, 1, nil)
		j.left("k", lo+1, 1) // clean-up time below the int64 range
		j.left("k", lo+2, 2)
		j.watermark(lo + 1)
		if n, timers := joinStateEntries(t, j), j.timers.svc.Len(); n != 0 || timers != 0 {
			t.Fatalf("%d state entries and %d timers, want none", n, timers)
		}
	})
	t.Run("window", func(t *testing.T) {
		j := newJoinSubtask(t, "window-join", sdk.Config{"size": "1000ms"}, 0, 1, nil)
		j.left("k", hi, 1)
		j.right("k", hi-5, 2)
		j.left("k", lo, 3)
		j.right("k", lo+5, 4)
		j.watermark(sdk.MaxWatermark)
		recs := j.out.take()
		if err := check.Joins(joinLines(recs), map[string]int{"k,1|2": 1, "k,3|4": 1}); err != nil {
			t.Fatal(err)
		}
		if n, timers := joinStateEntries(t, j), j.timers.svc.Len(); n != 0 || timers != 0 {
			t.Fatalf("%d state entries and %d timers at the end, want none", n, timers)
		}
	})
}

// TestJoinStateBounded feeds an unbounded stream to both sides of each
// join and checks that the state does not grow with it: it holds what
// can still join only.
func TestJoinStateBounded(t *testing.T) {
	for _, tc := range []joinCase{
		intervalCase("-5ms", "5ms"),
		intervalCase("-20ms", "-10ms"),
		windowJoinCase("10ms"),
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJoinSubtask(t, tc.operator, tc.cfg, 0, 1, nil)
			peak, pairs := 0, 0
			for i := int64(0); i < 20000; i++ {
				ts := i / 2
				j.record(int(i%2), strconv.FormatInt((i/2)%10, 10), ts, i)
				j.watermark(ts - 2)
				if i%1000 == 999 {
					pairs += len(j.out.take())
					n := joinStateEntries(t, j) + j.timers.svc.Len()
					if i > 2000 && n > 2*peak && peak > 0 {
						t.Fatalf("state grows: %d entries and timers at record %d, peak %d before", n, i, peak)
					}
					peak = max(peak, n)
				}
			}
			if pairs == 0 {
				t.Fatal("nothing joined")
			}
			if peak > 200 {
				t.Fatalf("peak state %d entries and timers for 10 keys", peak)
			}
		})
	}
}

func TestJoinConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		operator string
		cfg      sdk.Config
		want     string
	}{
		{"interval-join", sdk.Config{"upper": "5ms"}, `"lower": required`},
		{"interval-join", sdk.Config{"lower": "5ms"}, `"upper": required`},
		{"interval-join", sdk.Config{"lower": "5ms", "upper": "-5ms"}, `"upper": -5ms is below lower 5ms`},
		{"interval-join", sdk.Config{"lower": "1500us", "upper": "5ms"}, `"lower": must be a whole number of milliseconds, got 1.5ms`},
		{"interval-join", sdk.Config{"lower": "0s", "upper": "5"}, `"upper": time: missing unit`},
		{"interval-join", sdk.Config{"lower": 0.0, "upper": "5ms"}, `"lower": want a string`},
		{"window-join", sdk.Config{}, `"size": required`},
		{"window-join", sdk.Config{"size": "0s"}, `"size": must be positive, got 0s`},
		{"window-join", sdk.Config{"size": "-1s"}, `"size": must be positive`},
		{"window-join", sdk.Config{"size": "10.5ms"}, `"size": must be a whole number of milliseconds`},
	} {
		var err error
		if tc.operator == "interval-join" {
			_, err = window.ParseIntervalJoin(tc.cfg)
		} else {
			_, err = window.ParseWindowJoin(tc.cfg)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want an error containing %s", tc.operator, tc.cfg, err, tc.want)
		}
		ctx := newTestCtx(tc.operator, tc.cfg, 0, 1)
		ctx.Timers = &testTimers{}
		err = newJoinOperator(t, tc.operator).Open(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.operator+": config") {
			t.Errorf("%s %v: Open = %v, want the config error", tc.operator, tc.cfg, err)
		}
	}
	// Records must say which input they come from.
	for _, name := range []string{"interval-join", "window-join"} {
		j := newJoinSubtask(t, name, sdk.Config{"lower": "0s", "upper": "1ms", "size": "1ms"}, 0, 1, nil)
		if err := j.op.ProcessRecord(sdk.Record{Key: []byte("k")}, j.out); err == nil {
			t.Errorf("%s: ProcessRecord without an input succeeded", name)
		}
		if err := j.op.ProcessInput(2, sdk.Record{Key: []byte("k")}, j.out); err == nil || !strings.Contains(err.Error(), "input 2") {
			t.Errorf("%s: ProcessInput(2) = %v, want an error naming input 2", name, err)
		}
	}
}

func ExampleParseIntervalJoin() {
	spec, err := window.ParseIntervalJoin(sdk.Config{"lower": "-1s", "upper": "500ms"})
	fmt.Println(spec.Lower, spec.Upper, err)
	// Output: -1000 500 <nil>
}
