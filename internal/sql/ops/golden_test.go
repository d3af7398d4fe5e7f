package ops

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// The golden savepoints (testdata/golden/<case>/): the state of this
// release's stateful SQL operators, taken midway through a fixed input
// and committed as a savepoint's _metadata (its state inline, so it can
// move), with what the operator emits after restoring it at parallelism
// 2 and reading the rest of the input (output.txt). Every later commit
// must restore them and emit the same: a change that breaks one changes
// a state layout, which needs a migration (docs/savepoint-format.md).
// WEIR_GOLDEN_WRITE=1 writes them anew: for a new case only, or with the
// migration that reads the old ones.

type goldenCase struct {
	name   string
	newOp  func() sdk.Operator
	op     *plan.Operator
	events []event
	split  int
	lines  func(t testing.TB, recs []sdk.Record) []string
}

func goldenCases(t testing.TB) []goldenCase {
	ga := gaPlan(gaRetractIn, true, []int{0}, gaStreamAggs...)
	gaEvents, _ := gaStream(ga, 400)

	top := topPlan(3, true, true, topDesc(1))
	over := overPlan(-2, 1, true)
	steps := goldenTopSteps()

	rj := rjPlan(plan.FullJoin, true, true, true, 0)
	rjEvents, _ := rjStream(rj, rand.New(rand.NewPCG(5, 6)), 300, 6)

	win := aggPlan(aggIn, plan.Window{Kind: plan.Hop, Size: 10, Slide: 5},
		agg(plan.Count, -1, -1, tBigint), agg(plan.Sum, 1, -1, tNumeric(0)), agg(plan.Max, 4, -1, tVarchar))
	var winEvents []event
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 300 {
		ts := int64(i / 3)
		r := aggRow(string(rune('a'+rng.IntN(4))), rng.IntN(100), nil, nil, fmt.Sprint("s", rng.IntN(9)), nil)
		winEvents = append(winEvents, rec(rowRecord(aggIn, r, []int{0}, ts)))
		if i%20 == 19 {
			winEvents = append(winEvents, wm(ts-3))
		}
	}

	return []goldenCase{
		{"group-aggregate", newGroupAggregate, &plan.Operator{GroupAgg: ga}, gaEvents, 200,
			func(t testing.TB, recs []sdk.Record) []string { return gaChanges(t, ga, recs) }},
		{"top-n", newTopN, &plan.Operator{TopN: top}, topEvents(true, steps), len(steps) / 2,
			func(t testing.TB, recs []sdk.Record) []string { return topNChanges(t, top.Out, recs) }},
		{"over-aggregate", newOverAgg, &plan.Operator{OverAgg: over}, topEvents(true, steps), len(steps) / 2,
			func(t testing.TB, recs []sdk.Record) []string { return topNChanges(t, over.Out, recs) }},
		{"regular-join", func() sdk.Operator { return &Join{} }, &plan.Operator{Join: rj}, rjEvents, 150,
			func(t testing.TB, recs []sdk.Record) []string { return rjChanges(t, recs) }},
		{"window-aggregate", newWindowAggregate, &plan.Operator{WindowAgg: win}, winEvents, len(winEvents) / 2,
			func(t testing.TB, recs []sdk.Record) []string { return rowLines(t, win.Out, recs) }},
	}
}

// goldenTopSteps is a fixed changelog of topIn rows over 3 partitions.
func goldenTopSteps() []topStep {
	rng := rand.New(rand.NewPCG(11, 12))
	var steps []topStep
	var live []topStep
	for range 200 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			s := live[i]
			live = append(live[:i], live[i+1:]...)
			s.kind = row.Delete
			steps = append(steps, s)
			continue
		}
		s := topStep{row.Insert, string(rune('a' + rng.IntN(3))), rng.IntN(10), fmt.Sprint("s", rng.IntN(5))}
		live = append(live, s)
		steps = append(steps, s)
	}
	return steps
}

func TestGoldenSavepoints(t *testing.T) {
	write := os.Getenv("WEIR_GOLDEN_WRITE") != ""
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "golden", c.name)
			cfg := config(t, c.op)
			before, after := c.events[:c.split], c.events[c.split:]
			var wm0, clock0 int64 = sdk.MinWatermark, 0
			for _, e := range before {
				switch {
				case e.wm != 0:
					wm0 = e.wm
				case e.clock != 0:
					clock0 = e.clock
				}
			}
			if write {
				goldenWrite(t, c, cfg, dir, before)
			}
			md, err := storage.ReadMetadata(dir)
			if err != nil {
				t.Fatalf("the golden savepoint: %v (WEIR_GOLDEN_WRITE=1 writes a new case's)", err)
			}
			got := c.lines(t, goldenResume(t, c.newOp, cfg, md.GetSubtasks(), after, wm0, clock0))
			out := filepath.Join(dir, "output.txt")
			if write {
				if err := os.WriteFile(out, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(got, "\n") + "\n"; g != string(want) {
				t.Errorf("restored from %s, the operator emits\n%s\nwant (%s)\n%s", dir, g, out, want)
			}
		})
	}
}

// goldenWrite runs the input before the savepoint through the operator
// and writes its state as a savepoint's _metadata in dir, inline.
func goldenWrite(t *testing.T, c goldenCase, cfg sdk.Config, dir string, before []event) {
	t.Helper()
	s := newSubtask(t, c.newOp(), cfg, 0, 1, nil)
	for _, e := range before {
		deliver([]*subtask{s}, e)
	}
	states := checkpoint(t, []*subtask{s}, t.TempDir(), 1)
	for _, st := range states {
		for _, h := range []*weirv1.StateHandle{st.GetKeyedState(), st.GetOperatorState()} {
			if h.GetPath() == "" {
				continue
			}
			b, err := os.ReadFile(h.GetPath())
			if err != nil {
				t.Fatal(err)
			}
			h.InlineData, h.Path = b, ""
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	md := &weirv1.CheckpointMetadata{Version: 1, JobId: "golden", CheckpointId: 1, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT,
		MaxParallelism: sdktest.MaxParallelism, Subtasks: states}
	if _, err := storage.WriteMetadata(dir, md); err != nil {
		t.Fatal(err)
	}
}

// goldenResume restores the operator at parallelism 2 from states, with
// the watermark and the clock where they were, reads after to the end of
// event time, and returns what it emitted.
func goldenResume(t *testing.T, newOp func() sdk.Operator, cfg sdk.Config, states []*weirv1.SubtaskState, after []event, wm0, clock0 int64) []sdk.Record {
	t.Helper()
	subs := make([]*subtask, 2)
	for j := range subs {
		ctx := sdktest.Restore(t, "sql", cfg, j, len(subs), 1, 1, states)
		subs[j] = newSubtask(t, newOp(), cfg, j, len(subs), ctx)
		subs[j].watermark(wm0)
		subs[j].timers.nowMs = clock0
	}
	for _, e := range after {
		deliver(subs, e)
	}
	var out []sdk.Record
	for _, s := range subs {
		s.watermark(sdk.MaxWatermark)
		out = append(out, s.take()...)
	}
	return out
}
