package jobmanager

import (
	"context"
	"strings"
	"testing"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// A TaskManager's batch of acks is answered ack by ack: each refused one
// (here, of a job this JobManager does not run) gets the reason the single
// call would have failed with, in the order sent, and refuses no other.
func TestAcknowledgeCheckpointsAnswersEachAck(t *testing.T) {
	s := &Server{}
	acks := []*weirv1.AcknowledgeCheckpointRequest{
		{Attempt: &weirv1.ExecutionAttemptID{JobId: "gone-1", Vertex: "v"}, CheckpointId: 1},
		{Attempt: &weirv1.ExecutionAttemptID{JobId: "gone-2", Vertex: "v"}, CheckpointId: 1},
	}
	resp, err := s.AcknowledgeCheckpoints(context.Background(), &weirv1.AcknowledgeCheckpointsRequest{Acks: acks})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetErrors()) != len(acks) {
		t.Fatalf("%d answers for %d acks", len(resp.GetErrors()), len(acks))
	}
	for i, msg := range resp.GetErrors() {
		if want := acks[i].GetAttempt().GetJobId(); !strings.Contains(msg, "NotFound") || !strings.Contains(msg, want) {
			t.Errorf("ack %d: %q, want NotFound naming job %s", i, msg, want)
		}
	}
	if resp, err := s.AcknowledgeCheckpoints(context.Background(), &weirv1.AcknowledgeCheckpointsRequest{}); err != nil || len(resp.GetErrors()) != 0 {
		t.Errorf("no acks: %v, %v", resp, err)
	}
}
