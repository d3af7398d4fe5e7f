// Package sdktest runs operators in tests against the real state backend:
// Context is an sdk.Context backed by a state.Heap, so operator state goes
// through the same snapshot files and restore redistribution a failover
// uses, rather than through a map that would hide what a failover loses.
package sdktest

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// MaxParallelism is the number of key groups of every Context's heap.
const MaxParallelism = 128

// Context is an sdk.Context for one subtask, backed by a state.Heap.
type Context struct {
	// Vertex is the task name, also the vertex its snapshots are written
	// for.
	Vertex string
	// Attempt and RestoredID are what AttemptNumber and
	// RestoredCheckpointID return: Restore sets them, a test may set them
	// to fake a restore.
	Attempt    int
	RestoredID int64
	// Heap holds the operator's state: tests scope keyed state with
	// SetCurrentKey and may plant state in it before Open.
	Heap *state.Heap
	// Timers, Outputs and LateDropped are the event-time parts, set by
	// tests of operators that use them. TimerService panics without
	// Timers; Output of a name not in Outputs discards; EmitLate counts in
	// LateDropped what it drops for want of an sdk.LateOutput.
	Timers      sdk.TimerService
	Outputs     map[string]sdk.Collector
	LateDropped int
	// Pending is what a source reported last with ReportPending; it may
	// be reported from any goroutine.
	pending atomic.Pointer[sdk.Pending]

	subtask, parallelism int
	cfg                  sdk.Config
}

var _ sdk.Context = (*Context)(nil)

// NewContext is the context of subtask of parallelism on a first run: its
// heap holds the subtask's key groups and no state.
func NewContext(vertex string, cfg sdk.Config, subtask, parallelism int) *Context {
	return &Context{
		Vertex: vertex, subtask: subtask, parallelism: parallelism, cfg: cfg,
		Heap: state.NewHeap(MaxParallelism, keygroup.RangeFor(MaxParallelism, parallelism, subtask)),
	}
}

// Restore is the context of a new attempt restored, like a failover does,
// from prev: the subtask states of every subtask of the vertex in
// checkpoint id, at any parallelism.
func Restore(t testing.TB, vertex string, cfg sdk.Config, subtask, parallelism, attempt int, id int64, prev []*weirv1.SubtaskState) *Context {
	t.Helper()
	c := NewContext(vertex, cfg, subtask, parallelism)
	c.Attempt, c.RestoredID = attempt, id
	if err := c.Heap.Restore(prev, subtask, parallelism); err != nil {
		t.Fatalf("restore subtask %d/%d: %v", subtask, parallelism, err)
	}
	return c
}

func (c *Context) JobID() string                         { return "job-test" }
func (c *Context) TaskName() string                      { return c.Vertex }
func (c *Context) SubtaskIndex() int                     { return c.subtask }
func (c *Context) Parallelism() int                      { return c.parallelism }
func (c *Context) Metrics() sdk.MetricGroup              { return sdk.DiscardMetrics }
func (c *Context) AttemptNumber() int                    { return c.Attempt }
func (c *Context) Config() sdk.Config                    { return c.cfg }
func (c *Context) Logger() *slog.Logger                  { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (c *Context) ValueState(name string) sdk.ValueState { return c.Heap.ValueState(name) }
func (c *Context) MapState(name string) sdk.MapState     { return c.Heap.MapState(name) }
func (c *Context) ValueStateTTL(name string, ttl sdk.StateTTL) sdk.ValueState {
	return c.Heap.ValueStateTTL(name, ttl)
}
func (c *Context) MigrateState(name string, isMap bool, f func([]byte) ([]byte, error)) error {
	return c.Heap.MigrateState(name, isMap, f)
}
func (c *Context) MapStateTTL(name string, ttl sdk.StateTTL) sdk.MapState {
	return c.Heap.MapStateTTL(name, ttl)
}
func (c *Context) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	return c.Heap.ReducingState(name, reduce)
}
func (c *Context) ListState(name string) sdk.ListState      { return c.Heap.ListState(name, false) }
func (c *Context) UnionListState(name string) sdk.ListState { return c.Heap.ListState(name, true) }
func (c *Context) RestoredCheckpointID() int64              { return c.RestoredID }

// ReportPending keeps p for Pending.
func (c *Context) ReportPending(p sdk.Pending) { c.pending.Store(&p) }

// Pending is what the source reported last, the zero Pending (not Known)
// before it did.
func (c *Context) Pending() sdk.Pending {
	if p := c.pending.Load(); p != nil {
		return *p
	}
	return sdk.Pending{}
}

func (c *Context) TimerService() sdk.TimerService {
	if c.Timers == nil {
		panic("sdktest: this test gives the operator no timer service")
	}
	return c.Timers
}

func (c *Context) Output(name string) sdk.Collector {
	if c.Outputs[name] == nil {
		return discard{}
	}
	return c.Outputs[name]
}

func (c *Context) EmitLate(r sdk.Record) {
	if o := c.Outputs[sdk.LateOutput]; o != nil {
		o.Collect(r)
		return
	}
	c.LateDropped++
}

type discard struct{}

func (discard) Collect(sdk.Record) {}

// Process scopes keyed state to r's key and hands r to op, as the task
// does.
func (c *Context) Process(t testing.TB, op sdk.Operator, r sdk.Record, out sdk.Collector) error {
	t.Helper()
	c.Heap.SetCurrentKey(r.Key)
	return op.ProcessRecord(r, out)
}

// Checkpoint runs the synchronous and asynchronous part of checkpoint id
// the way the task does (op's SnapshotState if it has one, then
// Heap.Snapshot, then its Write into chk-<id> under root) and returns the
// subtask state to acknowledge.
func (c *Context) Checkpoint(t testing.TB, op any, root string, id int64) *weirv1.SubtaskState {
	t.Helper()
	if s, ok := op.(sdk.Snapshotter); ok {
		if err := s.SnapshotState(id); err != nil {
			t.Fatalf("subtask %d: SnapshotState(%d): %v", c.subtask, id, err)
		}
	}
	dir := filepath.Join(root, "chk-"+strconv.FormatInt(id, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := c.Heap.Snapshot().Write(dir, c.Vertex, c.subtask, c.parallelism)
	if err != nil {
		t.Fatalf("subtask %d: write snapshot %d: %v", c.subtask, id, err)
	}
	return st
}

// SplitOutput is an sdk.SourceOutput that records what a source emits, to
// which split, and which splits it opened and released.
type SplitOutput struct {
	Records []sdk.Record
	// Splits is the split of each record: "" for one collected by the
	// output itself.
	Splits           []string
	Opened, Released []string
}

var _ sdk.SourceOutput = (*SplitOutput)(nil)

func (o *SplitOutput) Collect(r sdk.Record) { o.collect(r, "") }

func (o *SplitOutput) Split(id string) sdk.Collector {
	o.Opened = append(o.Opened, id)
	return splitCollector{o, id}
}

func (o *SplitOutput) ReleaseSplit(id string) { o.Released = append(o.Released, id) }

func (o *SplitOutput) collect(r sdk.Record, split string) {
	o.Records = append(o.Records, r)
	o.Splits = append(o.Splits, split)
}

// Take returns the records collected since the last Take and their splits.
func (o *SplitOutput) Take() ([]sdk.Record, []string) {
	r, s := o.Records, o.Splits
	o.Records, o.Splits = nil, nil
	return r, s
}

type splitCollector struct {
	o  *SplitOutput
	id string
}

func (c splitCollector) Collect(r sdk.Record) { c.o.collect(r, c.id) }

// Clock is a manually advanced clock, for code that takes a now func so
// tests need not sleep.
type Clock struct{ T time.Time }

// NewClock is a Clock at a fixed time.
func NewClock() *Clock { return &Clock{T: time.Unix(1_700_000_000, 0)} }

func (c *Clock) Now() time.Time          { return c.T }
func (c *Clock) Advance(d time.Duration) { c.T = c.T.Add(d) }
