package weirv1

import "strings"

// The wire enums carry prefixes protobuf style asks for (JOB_STATE_RUNNING);
// users see Flink's names (RUNNING) in the CLI, the REST API, metrics and
// logs. These methods are the one place that maps them, so every surface
// agrees, also on the unset value.

// FlinkName is the job state as Flink names it; an unset state is
// INITIALIZING, Flink's state of a job not created yet.
func (s JobState) FlinkName() string {
	if s == JobState_JOB_STATE_UNSPECIFIED {
		return "INITIALIZING"
	}
	return strings.TrimPrefix(s.String(), "JOB_STATE_")
}

// FlinkName is the execution state as Flink names it; an unset state is
// CREATED.
func (s ExecutionState) FlinkName() string {
	if s == ExecutionState_EXECUTION_STATE_UNSPECIFIED {
		return "CREATED"
	}
	return strings.TrimPrefix(s.String(), "EXECUTION_STATE_")
}

// FlinkName is the checkpoint status as Flink names it; a checkpoint
// neither completed nor failed is IN_PROGRESS.
func (s CheckpointStatus) FlinkName() string {
	switch s {
	case CheckpointStatus_CHECKPOINT_STATUS_COMPLETED:
		return "COMPLETED"
	case CheckpointStatus_CHECKPOINT_STATUS_FAILED:
		return "FAILED"
	}
	return "IN_PROGRESS"
}

// FlinkName is the failure reason as Flink's CheckpointFailureReason names
// it; empty when unset.
func (r CheckpointFailureReason) FlinkName() string {
	if r == CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_UNSPECIFIED {
		return ""
	}
	return strings.TrimPrefix(r.String(), "CHECKPOINT_FAILURE_REASON_")
}

// Name is the next checkpoint's state without its prefix ("WAITING").
func (s NextCheckpoint_State) Name() string {
	return strings.TrimPrefix(s.String(), "STATE_")
}

// Name is what holds the next checkpoint back, without its prefix; empty
// when unset.
func (r NextCheckpoint_Reason) Name() string {
	if r == NextCheckpoint_REASON_UNSPECIFIED {
		return ""
	}
	return strings.TrimPrefix(r.String(), "REASON_")
}
