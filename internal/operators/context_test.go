package operators

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

const testMaxParallelism = 128

// testCtx is an sdk.Context backed by a real state.Heap, so operator state
// goes through the same snapshot files and restore redistribution a
// failover uses.
type testCtx struct {
	vertex      string
	subtask     int
	parallelism int
	attempt     int
	restoredID  int64
	cfg         sdk.Config
	heap        *state.Heap
	// timers, outputs and lateDropped are the event-time parts, set by
	// tests of operators that use them.
	timers      sdk.TimerService
	outputs     map[string]sdk.Collector
	lateDropped int
}

var _ sdk.Context = (*testCtx)(nil)

func newTestCtx(vertex string, cfg sdk.Config, subtask, parallelism int) *testCtx {
	return &testCtx{
		vertex: vertex, subtask: subtask, parallelism: parallelism, cfg: cfg,
		heap: state.NewHeap(testMaxParallelism, keygroup.RangeFor(testMaxParallelism, parallelism, subtask)),
	}
}

// restoreTestCtx is the context of a new attempt restored, like a failover
// does, from prev: the subtask states of every subtask of the vertex in
// checkpoint id.
func restoreTestCtx(t *testing.T, vertex string, cfg sdk.Config, subtask, parallelism, attempt int, id int64, prev []*weirv1.SubtaskState) *testCtx {
	t.Helper()
	c := newTestCtx(vertex, cfg, subtask, parallelism)
	c.attempt, c.restoredID = attempt, id
	if err := c.heap.Restore(prev, subtask, parallelism); err != nil {
		t.Fatalf("restore subtask %d/%d: %v", subtask, parallelism, err)
	}
	return c
}

func (c *testCtx) JobID() string                         { return "job-test" }
func (c *testCtx) TaskName() string                      { return c.vertex }
func (c *testCtx) SubtaskIndex() int                     { return c.subtask }
func (c *testCtx) Parallelism() int                      { return c.parallelism }
func (c *testCtx) Metrics() sdk.MetricGroup              { return sdk.DiscardMetrics }
func (c *testCtx) AttemptNumber() int                    { return c.attempt }
func (c *testCtx) Config() sdk.Config                    { return c.cfg }
func (c *testCtx) Logger() *slog.Logger                  { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (c *testCtx) ValueState(name string) sdk.ValueState { return c.heap.ValueState(name) }
func (c *testCtx) MapState(name string) sdk.MapState     { return c.heap.MapState(name) }
func (c *testCtx) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	return c.heap.ReducingState(name, reduce)
}
func (c *testCtx) ListState(name string) sdk.ListState { return c.heap.ListState(name, false) }
func (c *testCtx) UnionListState(name string) sdk.ListState {
	return c.heap.ListState(name, true)
}
func (c *testCtx) RestoredCheckpointID() int64 { return c.restoredID }
func (c *testCtx) TimerService() sdk.TimerService {
	if c.timers == nil {
		panic("testCtx: this test gives the operator no timer service")
	}
	return c.timers
}
func (c *testCtx) Output(name string) sdk.Collector {
	if c.outputs[name] == nil {
		return discardCollector{}
	}
	return c.outputs[name]
}
func (c *testCtx) EmitLate(r sdk.Record) {
	if o := c.outputs[sdk.LateOutput]; o != nil {
		o.Collect(r)
		return
	}
	c.lateDropped++
}

type discardCollector struct{}

func (discardCollector) Collect(sdk.Record) {}

// process scopes keyed state to r's key and hands r to op, as the task does.
func (c *testCtx) process(t *testing.T, op sdk.Operator, r sdk.Record, out sdk.Collector) error {
	t.Helper()
	c.heap.SetCurrentKey(r.Key)
	return op.ProcessRecord(r, out)
}

// checkpoint runs the synchronous and asynchronous part of checkpoint id the
// way the task does (SnapshotState, then Heap.Snapshot, then Write into
// chk-<id> under root) and returns the subtask state to acknowledge.
func (c *testCtx) checkpoint(t *testing.T, op any, root string, id int64) *weirv1.SubtaskState {
	t.Helper()
	if s, ok := op.(sdk.Snapshotter); ok {
		if err := s.SnapshotState(id); err != nil {
			t.Fatalf("subtask %d: SnapshotState(%d): %v", c.subtask, id, err)
		}
	}
	snap := c.heap.Snapshot()
	st, err := snap.Write(chkDir(t, root, id), c.vertex, c.subtask, c.parallelism)
	if err != nil {
		t.Fatalf("subtask %d: write snapshot %d: %v", c.subtask, id, err)
	}
	return st
}

func chkDir(t *testing.T, root string, id int64) string {
	t.Helper()
	dir := filepath.Join(root, "chk-"+strconv.FormatInt(id, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// collector records what an operator emits.
type collector struct{ records []sdk.Record }

func (c *collector) Collect(r sdk.Record) { c.records = append(c.records, r) }

func (c *collector) take() []sdk.Record {
	r := c.records
	c.records = nil
	return r
}
