package weirv1

import "testing"

// The CLI, the REST API and the logs all name states through these; an
// unset value must read as Flink's, not as UNSPECIFIED.
func TestFlinkNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{JobState_JOB_STATE_UNSPECIFIED.FlinkName(), "INITIALIZING"},
		{JobState_JOB_STATE_CANCELLING.FlinkName(), "CANCELLING"},
		{ExecutionState_EXECUTION_STATE_UNSPECIFIED.FlinkName(), "CREATED"},
		{ExecutionState_EXECUTION_STATE_CANCELING.FlinkName(), "CANCELING"},
		{CheckpointStatus_CHECKPOINT_STATUS_UNSPECIFIED.FlinkName(), "IN_PROGRESS"},
		{CheckpointStatus_CHECKPOINT_STATUS_COMPLETED.FlinkName(), "COMPLETED"},
		{CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_UNSPECIFIED.FlinkName(), ""},
		{CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED.FlinkName(), "CHECKPOINT_EXPIRED"},
		{NextCheckpoint_REASON_UNSPECIFIED.Name(), ""},
		{NextCheckpoint_STATE_SCHEDULED.Name(), "SCHEDULED"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestAttemptKey(t *testing.T) {
	for _, c := range []struct {
		a    *ExecutionAttemptID
		want string
	}{
		{&ExecutionAttemptID{Vertex: "src", SubtaskIndex: 1, Attempt: 2}, "src/1/2"},
		{&ExecutionAttemptID{JobId: "j", Vertex: "src", SubtaskIndex: 1, Attempt: 2, Session: "s"}, "j/src/1/2@s"},
	} {
		if got := c.a.Key(); got != c.want {
			t.Errorf("Key() = %q, want %q", got, c.want)
		}
	}
}
