package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestGraphDuringRescale: while a rescale is under way the job's graph is
// the one it is rescaled to, so a change of the checkpointing made then
// (and stored with the job) keeps the new parallelism; before, it was
// based on the graph being left, and the next leader undid the rescale.
func TestGraphDuringRescale(t *testing.T) {
	clock := &fakeClock{now: epoch}
	g := &weirv1.JobGraph{Name: "job", Vertices: []*weirv1.JobVertex{{Name: "a", Parallelism: 1}}}
	j, err := New(Config{JobID: "j", Session: "s", Graph: g}, clock)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.SlotsOffered([]string{"tm1"}); err != nil {
		t.Fatal(err)
	}
	for _, e := range j.View().Execs {
		j.TaskStateChanged(e.Attempt, weirv1.ExecutionState_EXECUTION_STATE_RUNNING, "")
	}
	g2 := proto.Clone(g).(*weirv1.JobGraph)
	g2.Vertices[0].Parallelism = 2
	if err := j.Rescale(g2); err != nil {
		t.Fatal(err)
	}
	if !j.UpdateCheckpointing(&weirv1.CheckpointConfig{Interval: durationpb.New(time.Hour)}) {
		t.Fatal("checkpointing not updated")
	}
	for name, got := range map[string]*weirv1.JobGraph{"Graph": j.Graph(), "View": j.View().Graph} {
		if p := got.GetVertices()[0].GetParallelism(); p != 2 {
			t.Errorf("%s during the rescale: parallelism %d, want the new 2", name, p)
		}
		if iv := got.GetCheckpointing().GetInterval().AsDuration(); iv != time.Hour {
			t.Errorf("%s during the rescale: interval %s, want 1h", name, iv)
		}
	}
}
