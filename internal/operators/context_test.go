package operators

import (
	"testing"

	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

const testMaxParallelism = sdktest.MaxParallelism

// testCtx is an sdk.Context backed by a real state.Heap, so operator state
// goes through the same snapshot files and restore redistribution a
// failover uses.
type testCtx = sdktest.Context

func newTestCtx(vertex string, cfg sdk.Config, subtask, parallelism int) *testCtx {
	return sdktest.NewContext(vertex, cfg, subtask, parallelism)
}

// restoreTestCtx is the context of a new attempt restored, like a failover
// does, from prev: the subtask states of every subtask of the vertex in
// checkpoint id.
func restoreTestCtx(t *testing.T, vertex string, cfg sdk.Config, subtask, parallelism, attempt int, id int64, prev []*weirv1.SubtaskState) *testCtx {
	t.Helper()
	return sdktest.Restore(t, vertex, cfg, subtask, parallelism, attempt, id, prev)
}

// collector records what an operator emits.
type collector struct{ records []sdk.Record }

func (c *collector) Collect(r sdk.Record) { c.records = append(c.records, r) }

func (c *collector) take() []sdk.Record {
	r := c.records
	c.records = nil
	return r
}
