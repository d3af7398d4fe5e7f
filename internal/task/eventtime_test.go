package task_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/window"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// windowJob is source -hash-> [slow -forward->] window -hash-> sink over
// sequence-source records with event time (1 ms apart, jitter 3 ms) and
// a watermark 4 ms behind.
func windowJob(count, keys, rate int, windowCfg map[string]any, windowP int, delay time.Duration, out string) []vertex {
	vs := []vertex{{
		name: "source", operator: "sequence-source", parallelism: 2,
		config: map[string]any{"count": count, "keys": keys, "rate": rate, "event-time": map[string]any{"step": "1ms", "jitter": "3ms"}},
		watermarks: &weirv1.WatermarkStrategy{
			MaxOutOfOrderness: durationpb.New(4 * time.Millisecond), Interval: durationpb.New(time.Millisecond),
		},
	}}
	from, part := "source", weirv1.Partitioner_PARTITIONER_HASH
	if delay > 0 {
		vs = append(vs, vertex{name: "slow", operator: "slow", parallelism: 2, from: []string{"source"}, partitioner: weirv1.Partitioner_PARTITIONER_HASH,
			config: map[string]any{"delay": delay.String()}})
		from = "slow"
		part = weirv1.Partitioner_PARTITIONER_FORWARD
		windowP = 2
	}
	return append(vs,
		vertex{name: "window", operator: "window", parallelism: windowP, from: []string{from}, partitioner: part, config: windowCfg},
		vertex{name: "sink", operator: "file-sink", parallelism: 2, from: []string{"window"}, partitioner: weirv1.Partitioner_PARTITIONER_HASH, config: map[string]any{"path": out}},
	)
}

// A windowed job fails after a checkpoint and is restored from it with
// the window at another parallelism: its committed output is exactly the
// batch result, every window once. Unaligned, a slow stage keeps records
// (and watermarks) in flight when the barriers overtake them.
func TestWindowJobRestoredExactlyOnce(t *testing.T) {
	const count, keys = 6000, 6
	for _, tc := range []struct {
		name  string
		cfg   map[string]any
		mode  string
		delay time.Duration
	}{
		{"tumbling", map[string]any{"type": "tumbling", "size": "50ms", "aggregate": "count"}, "aligned", 0},
		{"sliding", map[string]any{"type": "sliding", "size": "40ms", "slide": "10ms", "aggregate": "sum"}, "aligned", 0},
		{"session", map[string]any{"type": "session", "gap": "7ms", "aggregate": "count"}, "aligned", 0},
		{"tumbling-unaligned", map[string]any{"type": "tumbling", "size": "20ms", "aggregate": "sum"}, "unaligned", 300 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := window.Parse(sdk.Config(tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			first := startJob(t, windowJob(count, keys, 4000, tc.cfg, 2, tc.delay, out), dir, jobOptions{})
			var restored ckptResult
			for id := int64(1); id <= 20 && !restored.completed; id++ {
				time.Sleep(100 * time.Millisecond) // the checkpoint interval
				if r := first.checkpoint(id, checkpointOptions(tc.mode, 0), 10*time.Second); r.completed && !r.final {
					restored = r
				}
			}
			if !restored.completed {
				t.Fatal("no checkpoint completed before the end of the input")
			}
			first.stop()
			// The same topology (channel state names its vertices), without
			// the rate limit; the slow stage, if any, barely slow.
			second := startJob(t, windowJob(count, keys, 0, tc.cfg, 3, min(tc.delay, time.Nanosecond), out), dir, jobOptions{attempt: 2, restore: &restored})
			second.finish(restored.id+1, checkpointOptions(tc.mode, 0), time.Minute)
			got, err := check.ReadCommitted(out)
			if err != nil {
				t.Fatal(err)
			}
			want := check.BatchWindows(spec, check.SequenceRecords(count, keys, 1, 3))
			if err := check.Windows(got, want); err != nil {
				t.Fatal(err)
			}
			t.Logf("restored checkpoint %d; %d windows exactly once", restored.id, len(want))
		})
	}
}

// A join of two event-time sources (left: keys 0-5, 1 ms apart, jitter
// 3 ms; right: keys 0-3, 2 ms apart, jitter 4 ms; both with a watermark
// 5 ms behind) fails after a checkpoint and is restored from it with the
// join at another parallelism: its committed output is exactly the batch
// join, every pair once.
func TestJoinJobRestoredExactlyOnce(t *testing.T) {
	const leftCount, leftKeys, rightCount, rightKeys = 3000, 6, 2000, 4
	left := check.SequenceRecords(leftCount, leftKeys, 1, 3)
	right := check.SequenceRecords(rightCount, rightKeys, 2, 4)
	// The rates make both sides' event time advance alike (3 s a second),
	// so that neither holds the join's watermark back for long.
	joinJob := func(operator string, cfg map[string]any, joinP int, rated bool, out string) []vertex {
		wm := &weirv1.WatermarkStrategy{MaxOutOfOrderness: durationpb.New(5 * time.Millisecond), Interval: durationpb.New(time.Millisecond)}
		leftRate, rightRate := 1500, 750
		if !rated {
			leftRate, rightRate = 0, 0
		}
		hash := weirv1.Partitioner_PARTITIONER_HASH
		return []vertex{
			{name: "left", operator: "sequence-source", parallelism: 2, watermarks: wm,
				config: map[string]any{"count": leftCount, "keys": leftKeys, "rate": leftRate, "event-time": map[string]any{"step": "1ms", "jitter": "3ms"}}},
			{name: "right", operator: "sequence-source", parallelism: 2, watermarks: wm,
				config: map[string]any{"count": rightCount, "keys": rightKeys, "rate": rightRate, "event-time": map[string]any{"step": "2ms", "jitter": "4ms"}}},
			{name: "join", operator: operator, parallelism: joinP, from: []string{"left", "right"}, partitioner: hash, config: cfg},
			{name: "sink", operator: "file-sink", parallelism: 2, from: []string{"join"}, partitioner: hash, config: map[string]any{"path": out}},
		}
	}
	for _, tc := range []struct {
		name, operator    string
		cfg               map[string]any
		want              map[string]int
		firstP, restoredP int
	}{
		{"interval", "interval-join", map[string]any{"lower": "-4ms", "upper": "6ms"}, check.BatchIntervalJoin(left, right, -4, 6), 2, 3},
		{"window", "window-join", map[string]any{"size": "10ms"}, check.BatchWindowJoin(left, right, 10), 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			first := startJob(t, joinJob(tc.operator, tc.cfg, tc.firstP, true, out), dir, jobOptions{})
			var restored ckptResult
			for id := int64(1); id <= 20 && !restored.completed; id++ {
				time.Sleep(100 * time.Millisecond) // the checkpoint interval
				if r := first.checkpoint(id, checkpointOptions("aligned", 0), 10*time.Second); r.completed && !r.final {
					restored = r
				}
			}
			if !restored.completed {
				t.Fatal("no checkpoint completed before the end of the input")
			}
			first.stop()
			second := startJob(t, joinJob(tc.operator, tc.cfg, tc.restoredP, false, out), dir, jobOptions{attempt: 2, restore: &restored})
			second.finish(restored.id+1, checkpointOptions("aligned", 0), time.Minute)
			for _, j := range []*job{first, second} {
				if n := j.metric("weir_task_late_records_dropped_total", "join"); n != 0 {
					t.Fatalf("%v records late with watermarks behind the jitter", n)
				}
			}
			got, err := check.ReadCommitted(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Joins(got, tc.want); err != nil {
				t.Fatal(err)
			}
			t.Logf("restored checkpoint %d; %d lines exactly once", restored.id, len(got))
		})
	}
}

// Records later than the watermark allows go to the window's side output
// "late" when a vertex reads it: the windows and the late records
// together account for every record exactly once.
func TestWindowLateSideOutput(t *testing.T) {
	const count, keys = 4000, 4
	dir := t.TempDir()
	out, late := filepath.Join(dir, "out"), filepath.Join(dir, "late")
	vs := []vertex{
		{
			name: "source", operator: "shuffled-source", parallelism: 2,
			config: map[string]any{"count": count, "keys": keys},
			watermarks: &weirv1.WatermarkStrategy{
				MaxOutOfOrderness: durationpb.New(5 * time.Millisecond), Interval: durationpb.New(time.Millisecond),
			},
		},
		{name: "window", operator: "window", parallelism: 2, from: []string{"source"}, partitioner: weirv1.Partitioner_PARTITIONER_HASH,
			config: map[string]any{"type": "tumbling", "size": "10ms", "aggregate": "count"}},
		{name: "sink", operator: "file-sink", parallelism: 2, from: []string{"window"}, partitioner: weirv1.Partitioner_PARTITIONER_FORWARD, config: map[string]any{"path": out}},
		{name: "late", operator: "file-sink", parallelism: 2, from: []string{"window"}, partitioner: weirv1.Partitioner_PARTITIONER_FORWARD, output: sdk.LateOutput, config: map[string]any{"path": late}},
	}
	j := startJob(t, vs, dir, jobOptions{})
	j.finish(1, checkpointOptions("aligned", 0), time.Minute)
	windows, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	lateLines, err := check.ReadCommitted(late)
	if err != nil {
		t.Fatal(err)
	}
	counted := 0
	for _, l := range windows {
		n, err := strconv.Atoi(l[strings.LastIndexByte(l, ',')+1:])
		if err != nil {
			t.Fatalf("window line %q: %v", l, err)
		}
		counted += n
	}
	if len(lateLines) == 0 {
		t.Fatal("no record was late: the test does not test the late output")
	}
	if counted+len(lateLines) != count {
		t.Fatalf("%d records in windows + %d late = %d, want %d", counted, len(lateLines), counted+len(lateLines), count)
	}
	t.Logf("%d records in %d windows, %d late", counted, len(windows), len(lateLines))
}

// shuffledSource emits key i mod keys, value i, at event time
// i − ((i·7) mod 31) ms for i in [0, count) split across subtasks: up to
// 30 ms out of order. It keeps no position: tests using it do not restore.
type shuffledSource struct {
	next, stride, count, keys int64
}

func (s *shuffledSource) Open(ctx sdk.Context) error {
	var err error
	if s.count, err = ctx.Config().Int("count", 0); err != nil {
		return err
	}
	if s.keys, err = ctx.Config().Int("keys", 1); err != nil {
		return err
	}
	s.next, s.stride = int64(ctx.SubtaskIndex()), int64(ctx.Parallelism())
	return nil
}

func (s *shuffledSource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	for n := 0; n < 64 && s.next < s.count; n++ {
		i := s.next
		out.Collect(sdk.Record{Key: []byte(strconv.FormatInt(i%s.keys, 10)), Value: []byte(strconv.FormatInt(i, 10)), Timestamp: i - (i*7)%31})
		s.next += s.stride
	}
	return sdk.SourceStatus{EndOfInput: s.next >= s.count}, nil
}

func (s *shuffledSource) Close() error { return nil }

// An unbounded windowed job keeps its state flat: the checkpointed state
// of the window holds the open windows (and their timers), not the
// history.
func TestWindowStateStaysFlat(t *testing.T) {
	for _, cfg := range []map[string]any{
		{"type": "sliding", "size": "40ms", "slide": "10ms", "aggregate": "sum"},
		{"type": "session", "gap": "7ms", "aggregate": "count"},
	} {
		t.Run(cfg["type"].(string), func(t *testing.T) {
			dir := t.TempDir()
			// A rate the windows keep up with even under -race: with
			// back-pressure, the records queued between the source and the
			// window hold the watermark back, and the panes of that span of
			// event time are state too (bounded by the queues, but not flat).
			vs := windowJob(0, 64, 2000, cfg, 2, 0, filepath.Join(dir, "out"))
			j := startJob(t, vs, dir, jobOptions{})
			const samples = 10
			var sizes []int64
			for id := int64(1); len(sizes) < samples && id < 50; id++ {
				time.Sleep(100 * time.Millisecond) // the checkpoint interval
				r := j.checkpoint(id, checkpointOptions("aligned", 0), 10*time.Second)
				if !r.completed {
					continue
				}
				var size int64
				for _, st := range r.states["window"] {
					size += st.GetStateSize()
				}
				sizes = append(sizes, size)
			}
			if len(sizes) < samples {
				t.Fatalf("only %d checkpoints completed", len(sizes))
			}
			// The job keeps producing; the state must not grow with it. A
			// stall of the machine holds the watermark back for a moment and
			// one checkpoint catches the panes of that span: a spike, not
			// growth. Growth raises every later checkpoint, so the smallest
			// of the last three is compared with the largest of the early
			// ones (a leak of the ~200 records per interval adds kilobytes
			// per checkpoint and still fails).
			early := slices.Max(sizes[1:4])
			late := slices.Min(sizes[len(sizes)-3:])
			if late > 2*early+4096 {
				t.Fatalf("window state grows: %v bytes at successive checkpoints", sizes)
			}
			t.Logf("window state at successive checkpoints: %v bytes", sizes)
		})
	}
}

// Processing-time windows fire on the subtask's clock while the job runs,
// and the last ones at the end of the input: every record is in exactly
// one window.
func TestProcessingTimeWindows(t *testing.T) {
	const count, keys = 3000, 4
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	vs := []vertex{
		{name: "source", operator: "sequence-source", parallelism: 2, config: map[string]any{"count": count, "keys": keys, "rate": 3000}},
		{name: "window", operator: "window", parallelism: 2, from: []string{"source"}, partitioner: weirv1.Partitioner_PARTITIONER_HASH,
			config: map[string]any{"type": "tumbling", "size": "20ms", "time": "processing"}},
		{name: "sink", operator: "file-sink", parallelism: 2, from: []string{"window"}, partitioner: weirv1.Partitioner_PARTITIONER_FORWARD, config: map[string]any{"path": out}},
	}
	j := startJob(t, vs, dir, jobOptions{})
	j.finish(1, checkpointOptions("aligned", 0), time.Minute)
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	counted := 0
	for _, l := range lines {
		n, err := strconv.Atoi(l[strings.LastIndexByte(l, ',')+1:])
		if err != nil {
			t.Fatalf("window line %q: %v", l, err)
		}
		counted += n
	}
	if counted != count || len(lines) < 2*keys {
		t.Fatalf("%d records in %d windows, want %d records in several windows per key", counted, len(lines), count)
	}
	t.Logf("%d records in %d processing-time windows", counted, len(lines))
}
