package scheduler

import (
	"fmt"
	"testing"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The job lifecycle, written out edge by edge as the specification the
// transition table must match: every (from, to) pair not listed is refused.
func TestJobTransitions(t *testing.T) {
	const (
		created    = weirv1.JobState_JOB_STATE_CREATED
		running    = weirv1.JobState_JOB_STATE_RUNNING
		restarting = weirv1.JobState_JOB_STATE_RESTARTING
		failing    = weirv1.JobState_JOB_STATE_FAILING
		failed     = weirv1.JobState_JOB_STATE_FAILED
		cancelling = weirv1.JobState_JOB_STATE_CANCELLING
		canceled   = weirv1.JobState_JOB_STATE_CANCELED
		finished   = weirv1.JobState_JOB_STATE_FINISHED
		suspended  = weirv1.JobState_JOB_STATE_SUSPENDED
	)
	legal := map[[2]weirv1.JobState]bool{
		{created, running}: true, {created, failing}: true, {created, failed}: true,
		{created, cancelling}: true, {created, canceled}: true, {created, suspended}: true,
		{running, finished}: true, {running, failing}: true, {running, cancelling}: true,
		{running, restarting}: true, {running, suspended}: true,
		{restarting, running}: true, {restarting, failing}: true, {restarting, cancelling}: true,
		{restarting, suspended}: true,
		{failing, failed}:       true, {failing, suspended}: true,
		{cancelling, canceled}: true, {cancelling, suspended}: true,
	}
	for from := range weirv1.JobState_name {
		for to := range weirv1.JobState_name {
			f, d := weirv1.JobState(from), weirv1.JobState(to)
			t.Run(fmt.Sprintf("%s->%s", f.FlinkName(), d.FlinkName()), func(t *testing.T) {
				if got := CanTransition(f, d); got != legal[[2]weirv1.JobState{f, d}] {
					t.Fatalf("CanTransition = %t", got)
				}
			})
		}
	}
	for _, s := range []weirv1.JobState{finished, failed, canceled, suspended} {
		if !Terminal(s) {
			t.Errorf("%s is not terminal", s.FlinkName())
		}
	}
}
