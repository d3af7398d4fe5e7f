package task_test

import (
	"path/filepath"
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
