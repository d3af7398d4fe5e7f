package nexmark

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// testCtx is an sdk.Context backed by a real state.Heap, as in
// internal/operators/context_test.go: operator state goes through the same
// snapshot files and restore redistribution a failover uses.
type testCtx struct {
	subtask, parallelism int
	restoredID           int64
	cfg                  sdk.Config
	heap                 *state.Heap
}

var _ sdk.Context = (*testCtx)(nil)

const testMaxParallelism = 128

func newTestCtx(cfg sdk.Config, subtask, parallelism int) *testCtx {
	return &testCtx{
		subtask: subtask, parallelism: parallelism, cfg: cfg,
		heap: state.NewHeap(testMaxParallelism, keygroup.RangeFor(testMaxParallelism, parallelism, subtask)),
	}
}

// restoreTestCtx is the context of a subtask restored from checkpoint id,
// whose subtask states (at any parallelism) are prev.
func restoreTestCtx(t *testing.T, cfg sdk.Config, subtask, parallelism int, id int64, prev []*weirv1.SubtaskState) *testCtx {
	t.Helper()
	c := newTestCtx(cfg, subtask, parallelism)
	c.restoredID = id
	if err := c.heap.Restore(prev, subtask, parallelism); err != nil {
		t.Fatalf("restore subtask %d/%d: %v", subtask, parallelism, err)
	}
	return c
}

func (c *testCtx) JobID() string                         { return "job-test" }
func (c *testCtx) TaskName() string                      { return "nexmark" }
func (c *testCtx) SubtaskIndex() int                     { return c.subtask }
func (c *testCtx) Parallelism() int                      { return c.parallelism }
func (c *testCtx) Metrics() sdk.MetricGroup              { return sdk.DiscardMetrics }
func (c *testCtx) AttemptNumber() int                    { return 0 }
func (c *testCtx) Config() sdk.Config                    { return c.cfg }
func (c *testCtx) Logger() *slog.Logger                  { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (c *testCtx) ValueState(name string) sdk.ValueState { return c.heap.ValueState(name) }
func (c *testCtx) MapState(name string) sdk.MapState     { return c.heap.MapState(name) }
func (c *testCtx) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	return c.heap.ReducingState(name, reduce)
}
func (c *testCtx) ListState(name string) sdk.ListState      { return c.heap.ListState(name, false) }
func (c *testCtx) UnionListState(name string) sdk.ListState { return c.heap.ListState(name, true) }
func (c *testCtx) RestoredCheckpointID() int64              { return c.restoredID }
func (c *testCtx) TimerService() sdk.TimerService           { panic("testCtx: no timer service") }
func (c *testCtx) Output(string) sdk.Collector              { panic("testCtx: no side outputs") }
func (c *testCtx) EmitLate(sdk.Record)                      { panic("testCtx: no late records") }

// checkpoint runs SnapshotState, then the heap snapshot and its write into
// chk-<id> under root, as the task does, and returns the subtask state.
func (c *testCtx) checkpoint(t *testing.T, s *Source, root string, id int64) *weirv1.SubtaskState {
	t.Helper()
	if err := s.SnapshotState(id); err != nil {
		t.Fatalf("subtask %d: SnapshotState(%d): %v", c.subtask, id, err)
	}
	dir := filepath.Join(root, "chk-"+strconv.FormatInt(id, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := c.heap.Snapshot().Write(dir, "nexmark", c.subtask, c.parallelism)
	if err != nil {
		t.Fatalf("subtask %d: write snapshot %d: %v", c.subtask, id, err)
	}
	return st
}
