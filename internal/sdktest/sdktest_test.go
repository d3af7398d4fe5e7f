package sdktest

import (
	"slices"
	"testing"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// listOp keeps its items in operator list state.
type listOp struct{ items sdk.ListState }

func (o *listOp) SnapshotState(int64) error { return nil }

// A checkpoint of operator list state restored at another parallelism
// hands every item to exactly one new subtask, and the restored context
// says it was restored.
func TestCheckpointRestore(t *testing.T) {
	root := t.TempDir()
	var prev []*weirv1.SubtaskState
	for s := range 2 {
		c := NewContext("v", nil, s, 2)
		c.ListState("l").Update([][]byte{{byte(s)}, {byte(s + 2)}})
		prev = append(prev, c.Checkpoint(t, &listOp{}, root, 7))
	}
	var got []byte
	for s := range 3 {
		c := Restore(t, "v", sdk.Config{"k": 1.0}, s, 3, 2, 7, prev)
		if c.RestoredCheckpointID() != 7 || c.AttemptNumber() != 2 || c.SubtaskIndex() != s || c.Parallelism() != 3 || c.Config()["k"] != 1.0 {
			t.Fatalf("restored context %d: %+v", s, c)
		}
		for _, it := range c.ListState("l").Get() {
			got = append(got, it...)
		}
	}
	slices.Sort(got)
	if want := []byte{0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("restored items %v, want %v", got, want)
	}
}

func TestOutputs(t *testing.T) {
	c := NewContext("v", nil, 0, 1)
	c.Output("side").Collect(sdk.Record{}) // discarded
	c.EmitLate(sdk.Record{})
	if c.LateDropped != 1 {
		t.Fatalf("LateDropped = %d, want 1", c.LateDropped)
	}
	var late SplitOutput
	c.Outputs = map[string]sdk.Collector{sdk.LateOutput: &late}
	c.EmitLate(sdk.Record{Timestamp: 5})
	if c.LateDropped != 1 || len(late.Records) != 1 {
		t.Fatalf("late record dropped")
	}
}

func TestSplitOutput(t *testing.T) {
	var o SplitOutput
	o.Collect(sdk.Record{Timestamp: 1})
	o.Split("a").Collect(sdk.Record{Timestamp: 2})
	o.ReleaseSplit("a")
	recs, splits := o.Take()
	if len(recs) != 2 || recs[1].Timestamp != 2 || !slices.Equal(splits, []string{"", "a"}) {
		t.Fatalf("took %v, %v", recs, splits)
	}
	if !slices.Equal(o.Opened, []string{"a"}) || !slices.Equal(o.Released, []string{"a"}) || o.Records != nil {
		t.Fatalf("after Take: %+v", o)
	}
}

func TestClock(t *testing.T) {
	c := NewClock()
	t0 := c.Now()
	c.Advance(time.Second)
	if d := c.Now().Sub(t0); d != time.Second {
		t.Fatalf("advanced %v", d)
	}
}
