package ops

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/sdk"
)

type list struct{ items [][]byte }

func (l *list) Get() [][]byte     { return l.items }
func (l *list) Update(v [][]byte) { l.items = v }
func (l *list) Add(v []byte)      { l.items = append(l.items, v) }
func (l *list) Clear()            { l.items = nil }

type fakeCtx struct {
	cfg      sdk.Config
	lists    map[string]*list
	restored int64
}

func (c *fakeCtx) JobID() string                    { return "job" }
func (c *fakeCtx) TaskName() string                 { return "source" }
func (c *fakeCtx) SubtaskIndex() int                { return 0 }
func (c *fakeCtx) Parallelism() int                 { return 1 }
func (c *fakeCtx) Metrics() sdk.MetricGroup         { return sdk.DiscardMetrics }
func (c *fakeCtx) AttemptNumber() int               { return 0 }
func (c *fakeCtx) Config() sdk.Config               { return c.cfg }
func (c *fakeCtx) Logger() *slog.Logger             { return slog.Default() }
func (c *fakeCtx) ValueState(string) sdk.ValueState { return nil }
func (c *fakeCtx) MapState(string) sdk.MapState     { return nil }
func (c *fakeCtx) ValueStateTTL(string, sdk.StateTTL) sdk.ValueState {
	return nil
}
func (c *fakeCtx) MapStateTTL(string, sdk.StateTTL) sdk.MapState { return nil }
func (c *fakeCtx) ReducingState(string, func(acc, v []byte) []byte) sdk.ReducingState {
	return nil
}
func (c *fakeCtx) UnionListState(string) sdk.ListState { return &list{} }
func (c *fakeCtx) RestoredCheckpointID() int64         { return c.restored }
func (c *fakeCtx) ReportPending(sdk.Pending)           {}
func (c *fakeCtx) TimerService() sdk.TimerService      { return nil }
func (c *fakeCtx) Output(string) sdk.Collector         { return nil }
func (c *fakeCtx) EmitLate(sdk.Record)                 {}
func (c *fakeCtx) ListState(name string) sdk.ListState {
	if c.lists[name] == nil {
		c.lists[name] = &list{}
	}
	return c.lists[name]
}

type count struct{ n int }

func (c *count) Collect(sdk.Record) { c.n++ }

// A restored clock source owes the records of the time it was down, emits
// them as fast as it can and reports when it is on time again.
func TestClockSourceCatchesUp(t *testing.T) {
	dir := t.TempDir()
	const rate = 10000
	t0 := time.Now().Add(-2 * time.Second)
	cfg := sdk.Config{"rate": float64(rate), "keys": float64(16), "t0-ms": float64(t0.UnixMilli()), "dir": dir}
	ctx := &fakeCtx{cfg: cfg, lists: map[string]*list{}}
	// Checkpointed 1 s into the timeline: position 10000.
	first := &ClockSource{}
	if err := first.Open(ctx); err != nil {
		t.Fatal(err)
	}
	first.next = rate
	if err := first.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	ctx.restored = 1
	s := &ClockSource{}
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if s.next != rate || s.lagAtOpen < rate {
		t.Fatalf("restored at %d with lag %d, want %d and ≥ %d", s.next, s.lagAtOpen, rate, rate)
	}
	out := &count{}
	deadline := time.Now().Add(5 * time.Second)
	for !s.reported && time.Now().Before(deadline) {
		if _, err := s.Emit(out); err != nil {
			t.Fatal(err)
		}
	}
	if !s.reported {
		t.Fatal("never caught up")
	}
	b, err := os.ReadFile(filepath.Join(dir, "clock-0.catchup"))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(b)); len(f) != 4 || f[0] != "1" {
		t.Fatalf("report %q", b)
	}
	if out.n < rate {
		t.Fatalf("replayed only %d records", out.n)
	}
}
