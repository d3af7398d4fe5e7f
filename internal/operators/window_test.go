package operators

import (
	"fmt"
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

// testTimers is the sdk.TimerService of a windowSubtask: a real timer
// service over the subtask's heap state, with the watermark and clock the
// test sets.
type testTimers struct {
	svc    *timer.Service
	key    []byte
	wm     int64
	nowMs  int64
	closed bool
}

func (s *testTimers) CurrentWatermark() int64      { return s.wm }
func (s *testTimers) CurrentProcessingTime() int64 { return s.nowMs }
func (s *testTimers) RegisterEventTimeTimer(ns []byte, ts int64) {
	s.svc.Register(timer.EventTime, s.key, ns, ts)
}
func (s *testTimers) RegisterProcessingTimeTimer(ns []byte, ts int64) {
	s.svc.Register(timer.ProcessingTime, s.key, ns, ts)
}
func (s *testTimers) DeleteEventTimeTimer(ns []byte, ts int64) {
	s.svc.Delete(timer.EventTime, s.key, ns, ts)
}
func (s *testTimers) DeleteProcessingTimeTimer(ns []byte, ts int64) {
	s.svc.Delete(timer.ProcessingTime, s.key, ns, ts)
}

// windowSubtask runs a Window operator the way the task does: records
// with their key's state, timers fired in order when the watermark or the
// clock passes them.
type windowSubtask struct {
	t      *testing.T
	ctx    *testCtx
	op     *Window
	timers *testTimers
	out    *collector
	late   *collector
}

func newWindowSubtask(t *testing.T, cfg sdk.Config, subtask, parallelism int, ctx *testCtx) *windowSubtask {
	t.Helper()
	if ctx == nil {
		ctx = newTestCtx("window", cfg, subtask, parallelism)
	}
	w := &windowSubtask{t: t, ctx: ctx, op: &Window{}, out: &collector{}, late: &collector{}}
	w.timers = &testTimers{svc: timer.New(ctx.Heap), wm: sdk.MinWatermark}
	if err := w.timers.svc.Restore(); err != nil {
		t.Fatalf("restore timers: %v", err)
	}
	ctx.Timers = w.timers
	ctx.Outputs = map[string]sdk.Collector{sdk.LateOutput: w.late}
	if err := w.op.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	return w
}

func (w *windowSubtask) record(key string, ts, v int64) {
	w.t.Helper()
	w.timers.key = []byte(key)
	r := sdk.Record{Key: []byte(key), Value: []byte(strconv.FormatInt(v, 10)), Timestamp: ts}
	if err := w.ctx.Process(w.t, w.op, r, w.out); err != nil {
		w.t.Fatalf("process %s@%d: %v", key, ts, err)
	}
}

func (w *windowSubtask) fire(d timer.Domain, upTo int64) {
	w.t.Helper()
	for {
		tm, ok := w.timers.svc.Pop(d, upTo)
		if !ok {
			return
		}
		w.timers.key = tm.Key
		err := w.op.OnTimer(sdk.Timer{Domain: sdk.TimeDomain(d), Timestamp: tm.Timestamp, Key: tm.Key, Namespace: tm.Namespace}, w.out)
		if err != nil {
			w.t.Fatalf("timer %v: %v", tm, err)
		}
	}
}

func (w *windowSubtask) watermark(wm int64) {
	w.t.Helper()
	if wm <= w.timers.wm {
		return
	}
	w.timers.wm = wm
	w.fire(timer.EventTime, wm)
}

func (w *windowSubtask) clock(ms int64) {
	w.t.Helper()
	w.timers.nowMs = ms
	w.fire(timer.ProcessingTime, ms)
}

// results parses the emitted windows as "key,start,end" → result, failing
// on a window emitted twice.
func windowResults(t *testing.T, recs []sdk.Record, into map[string]string) {
	t.Helper()
	for _, r := range recs {
		parts := strings.SplitN(string(r.Value), ",", 3)
		if len(parts) != 3 {
			t.Fatalf("bad window record %q", r.Value)
		}
		id := string(r.Key) + "," + parts[0] + "," + parts[1]
		if prev, dup := into[id]; dup {
			t.Fatalf("window %s emitted twice (%s, then %s)", id, prev, parts[2])
		}
		end, _ := strconv.ParseInt(parts[1], 10, 64)
		if r.Timestamp != window.MaxTimestamp(end) {
			t.Fatalf("window %s has timestamp %d, want %d", id, r.Timestamp, window.MaxTimestamp(end))
		}
		into[id] = parts[2]
	}
}

// TestWindowMatchesBatch runs every window type over records coming out
// of order (bounded by the watermark's out-of-orderness, so none is late),
// with checkpoints restored at other parallelisms on the way, and compares
// the windows emitted with a batch computation over the same records:
// every window exactly once, with exactly the batch result.
func TestWindowMatchesBatch(t *testing.T) {
	cases := []sdk.Config{
		{"type": "tumbling", "size": "10ms", "aggregate": "count"},
		{"type": "tumbling", "size": "7ms", "aggregate": "sum"},
		{"type": "sliding", "size": "10ms", "slide": "2ms", "aggregate": "sum"},
		{"type": "sliding", "size": "9ms", "slide": "6ms", "aggregate": "max"},
		{"type": "sliding", "size": "4ms", "slide": "4ms", "aggregate": "min"},
		{"type": "session", "gap": "3ms", "aggregate": "count"},
		{"type": "session", "gap": "5ms", "aggregate": "avg"},
	}
	for _, cfg := range cases {
		name := fmt.Sprintf("%s-%s-%s", cfg["type"], cfg["size"], cfg["aggregate"])
		if cfg["type"] == "session" {
			name = fmt.Sprintf("session-%s-%s", cfg["gap"], cfg["aggregate"])
		}
		t.Run(name, func(t *testing.T) {
			spec, err := window.Parse(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for seed := range uint64(4) {
				runWindowAgainstBatch(t, cfg, spec, seed)
			}
		})
	}
}

func runWindowAgainstBatch(t *testing.T, cfg sdk.Config, spec window.Spec, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	const n, jitter = 600, 6
	keys := []string{"a", "b", "c", "d", "e"}
	recs := make([]check.Record, n)
	var gaps int64
	for i := range recs {
		// Gaps now and then, so sessions close.
		if i%50 == 0 {
			gaps += int64(rng.IntN(12))
		}
		base := int64(i) + gaps
		recs[i] = check.Record{Key: keys[rng.IntN(len(keys))], Timestamp: base - int64(rng.IntN(jitter+1)), Value: int64(rng.IntN(100)) - 20}
	}
	// The records' timestamps are out of order by at most jitter
	// relative to the newest so far: that bounds the watermark.
	parallelism := 2
	subs := make([]*windowSubtask, parallelism)
	for i := range subs {
		subs[i] = newWindowSubtask(t, cfg, i, parallelism, nil)
	}
	got := map[string]string{}
	collect := func() {
		for _, s := range subs {
			windowResults(t, s.out.take(), got)
			if len(s.late.records) > 0 {
				t.Fatalf("seed %d: %d records late with a watermark within the jitter", seed, len(s.late.records))
			}
		}
	}
	root := t.TempDir()
	maxTs := int64(-1 << 62)
	var id int64
	for i, r := range recs {
		kg := keygroup.Of([]byte(r.Key), testMaxParallelism)
		subs[keygroup.OperatorIndex(kg, testMaxParallelism, len(subs))].record(r.Key, r.Timestamp, r.Value)
		maxTs = max(maxTs, r.Timestamp)
		if i%7 == 6 {
			for _, s := range subs {
				s.watermark(maxTs - jitter - 1)
			}
		}
		if i%150 == 149 {
			// Checkpoint, drop the subtasks, restore at another parallelism.
			collect()
			id++
			var prev []*weirv1.SubtaskState
			for _, s := range subs {
				prev = append(prev, s.ctx.Checkpoint(t, s.op, root, id))
			}
			wm := subs[0].timers.wm
			parallelism = 1 + rng.IntN(3)
			subs = make([]*windowSubtask, parallelism)
			for j := range subs {
				ctx := restoreTestCtx(t, "window", cfg, j, parallelism, int(id), id, prev)
				subs[j] = newWindowSubtask(t, cfg, j, parallelism, ctx)
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
	want := check.BatchWindows(spec, recs)
	for id, w := range want {
		if g, ok := got[id]; !ok {
			t.Errorf("seed %d: window %s missing (want %s)", seed, id, w)
		} else if g != w {
			t.Errorf("seed %d: window %s = %s, want %s", seed, id, g, w)
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("seed %d: window %s = %s is not in the batch result", seed, id, g)
		}
	}
	// Everything fired: no state and no timer is left.
	for _, s := range subs {
		if n := s.timers.svc.Len(); n != 0 {
			t.Errorf("seed %d: %d timers left after the end of event time", seed, n)
		}
		if n := stateEntries(t, s); n != 0 {
			t.Errorf("seed %d: %d window state entries left after the end of event time", seed, n)
		}
	}
}

// stateEntries counts the window state entries of every key of s: the
// panes, and the sessions of the keys the tests use (a key's sessions are
// one value).
func stateEntries(t *testing.T, s *windowSubtask) int {
	t.Helper()
	n := 0
	if err := s.ctx.Heap.ScanMap("panes", func(_, _, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	sessions := s.ctx.Heap.ValueState("sessions")
	for _, k := range []string{"a", "b", "c", "d", "e", "k", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"} {
		s.ctx.Heap.SetCurrentKey([]byte(k))
		if _, ok := sessions.Value(); ok {
			n++
		}
	}
	return n
}

func TestWindowLateRecords(t *testing.T) {
	t.Run("dropped behind the watermark", func(t *testing.T) {
		w := newWindowSubtask(t, sdk.Config{"type": "tumbling", "size": "10ms", "aggregate": "count"}, 0, 1, nil)
		w.record("k", 5, 1)
		w.watermark(9)
		w.record("k", 3, 1) // window [0,10) fired and is cleaned
		w.watermark(sdk.MaxWatermark)
		got := map[string]string{}
		windowResults(t, w.out.take(), got)
		if got["k,0,10"] != "1" || len(got) != 1 {
			t.Fatalf("windows = %v, want only k,0,10 = 1", got)
		}
		if len(w.late.records) != 1 || w.late.records[0].Timestamp != 3 {
			t.Fatalf("late output = %v, want the record at 3", w.late.records)
		}
	})
	t.Run("counted without a late output", func(t *testing.T) {
		w := newWindowSubtask(t, sdk.Config{"type": "session", "gap": "5ms"}, 0, 1, nil)
		w.ctx.Outputs = nil
		w.record("k", 5, 1)
		w.watermark(20)
		w.record("k", 1, 1)
		if w.ctx.LateDropped != 1 {
			t.Fatalf("late dropped = %d, want 1", w.ctx.LateDropped)
		}
	})
	t.Run("allowed lateness fires again", func(t *testing.T) {
		w := newWindowSubtask(t, sdk.Config{"type": "tumbling", "size": "10ms", "aggregate": "sum", "allowed-lateness": "5ms"}, 0, 1, nil)
		w.record("k", 5, 2)
		w.watermark(9)
		first := w.out.take()
		w.record("k", 6, 3) // within lateness: fires again with 5
		second := w.out.take()
		w.watermark(14) // cleanup time 9+5
		w.record("k", 7, 4)
		if len(first) != 1 || string(first[0].Value) != "0,10,2" || len(second) != 1 || string(second[0].Value) != "0,10,5" {
			t.Fatalf("firings = %v then %v, want 0,10,2 then 0,10,5", first, second)
		}
		if len(w.late.records) != 1 {
			t.Fatalf("late = %v, want the record after the cleanup", w.late.records)
		}
		if n := stateEntries(t, w); n != 0 {
			t.Fatalf("%d state entries after the cleanup", n)
		}
	})
}

func TestWindowProcessingTime(t *testing.T) {
	w := newWindowSubtask(t, sdk.Config{"type": "tumbling", "size": "10ms", "time": "processing"}, 0, 1, nil)
	w.clock(3)
	w.record("k", 1000, 1) // the timestamp does not matter
	w.record("k", -5, 1)
	w.clock(12)
	w.record("k", 0, 1)
	got := map[string]string{}
	windowResults(t, w.out.take(), got)
	if len(got) != 1 || got["k,0,10"] != "2" {
		t.Fatalf("windows = %v, want k,0,10 = 2", got)
	}
	w.clock(25)
	windowResults(t, w.out.take(), got)
	if got["k,10,20"] != "1" {
		t.Fatalf("windows = %v, want k,10,20 = 1", got)
	}
}

// TestWindowStateBounded feeds an unbounded stream to each window type and
// checks that the state does not grow with it: it holds the open windows
// only.
func TestWindowStateBounded(t *testing.T) {
	for _, cfg := range []sdk.Config{
		{"type": "tumbling", "size": "10ms"},
		{"type": "sliding", "size": "20ms", "slide": "5ms", "aggregate": "sum"},
		{"type": "session", "gap": "4ms", "allowed-lateness": "10ms"},
	} {
		t.Run(cfg["type"].(string), func(t *testing.T) {
			w := newWindowSubtask(t, cfg, 0, 1, nil)
			peak := 0
			for i := int64(0); i < 20000; i++ {
				ts := i + (i/10)*3 // sessions close every 10 records
				w.record(strconv.FormatInt(i%10, 10), ts, i)
				w.watermark(ts - 2)
				if i%1000 == 999 {
					w.out.take()
					n := stateEntries(t, w) + w.timers.svc.Len()
					if i > 2000 && n > 2*peak && peak > 0 {
						t.Fatalf("state grows: %d entries and timers at record %d, peak %d before", n, i, peak)
					}
					peak = max(peak, n)
				}
			}
			if peak > 200 {
				t.Fatalf("peak state %d entries and timers for 10 keys", peak)
			}
		})
	}
}

func TestWindowConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  sdk.Config
		want string
	}{
		{sdk.Config{"type": "sliding", "size": "5s", "slide": "10s"}, `"slide": 10s exceeds the window size 5s`},
		{sdk.Config{"type": "session"}, `"gap": required`},
		{sdk.Config{"type": "tumbling", "size": "0s"}, `"size": must be positive`},
		{sdk.Config{"type": "tumbling", "size": "-1s"}, `"size": must be positive`},
		{sdk.Config{"type": "tumbling"}, `"size": required`},
		{sdk.Config{"type": "hopping", "size": "1s"}, `unknown window type "hopping"`},
		{sdk.Config{"type": "tumbling", "size": "1s", "aggregate": "median"}, `unknown aggregate "median"`},
		{sdk.Config{"type": "tumbling", "size": "1s", "time": "processing", "allowed-lateness": "1s"}, `processing-time windows have no late records`},
	} {
		_, err := window.Parse(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want an error containing %s", tc.cfg, err, tc.want)
		}
	}
}
