package scheduler

import (
	"slices"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// transitions is the job lifecycle: every edge not listed is refused.
var transitions = map[weirv1.JobState][]weirv1.JobState{
	weirv1.JobState_JOB_STATE_CREATED:    {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_RUNNING, weirv1.JobState_JOB_STATE_FAILING, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELLING, weirv1.JobState_JOB_STATE_CANCELED},
	weirv1.JobState_JOB_STATE_RUNNING:    {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILING, weirv1.JobState_JOB_STATE_CANCELLING, weirv1.JobState_JOB_STATE_RESTARTING},
	weirv1.JobState_JOB_STATE_RESTARTING: {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_RUNNING, weirv1.JobState_JOB_STATE_FAILING, weirv1.JobState_JOB_STATE_CANCELLING},
	weirv1.JobState_JOB_STATE_FAILING:    {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_FAILED},
	weirv1.JobState_JOB_STATE_CANCELLING: {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_CANCELED},
}

// CanTransition reports whether the lifecycle has the edge from → to.
func CanTransition(from, to weirv1.JobState) bool {
	return slices.Contains(transitions[from], to)
}

// Terminal reports whether a job in st is over on this JobManager
// (SUSPENDED: another leader carries it on).
func Terminal(st weirv1.JobState) bool {
	switch st {
	case weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_SUSPENDED:
		return true
	}
	return false
}

// GloballyTerminal reports whether a job in st is over for good.
func GloballyTerminal(st weirv1.JobState) bool {
	return Terminal(st) && st != weirv1.JobState_JOB_STATE_SUSPENDED
}
