// Package putback lets a test put a fixed bug back into the production
// code, to show that the test that guards against it finds it: the
// simulator must fail on a scheduler that hangs a bounded job, the chaos
// checkers on a sink that duplicates. A bug is a name that the code it
// lives in checks with Active. Only a build with the failpoints tag can
// activate one; in any other build Active is a constant false the
// compiler removes.
package putback

// The bugs that can be put back, by the package that fixed them.
const (
	// FinishingRacesRegionRestart (scheduler): a checkpoint that ends the
	// subtasks while a region restarts does not restart the whole job.
	FinishingRacesRegionRestart = "finishing-races-region-restart"
	// FinalNotifyOnce (coordinator): the final notification is sent once,
	// never repeated to the subtasks that did not finish.
	FinalNotifyOnce = "final-notify-once"
	// CancelOvertakesDeploy (attempts): a cancel of an attempt not yet
	// deployed, or being deployed, is forgotten.
	CancelOvertakesDeploy = "cancel-overtakes-deploy"
	// GraphBeforeRescale (scheduler): during a rescale the job's graph is
	// the one being left, so a change stored meanwhile undoes the rescale.
	GraphBeforeRescale = "graph-before-rescale"
	// DuplicateAckDiscards (coordinator): an ack that comes again after
	// its checkpoint completed has its state discarded: the completed
	// checkpoint's own files.
	DuplicateAckDiscards = "duplicate-ack-discards"
	// UnalignedWhileUnstored (coordinator): a job with a broadcast edge,
	// rescaled but its new graph not stored yet, takes unaligned
	// checkpoints, which a new leader cannot restore at the stored
	// parallelism.
	UnalignedWhileUnstored = "unaligned-while-unstored"
	// CheckpointAfterRescale (coordinator): a checkpoint running beside a
	// rescale's completes after it, and the rescale restores that one,
	// taken with the job's own options at the old parallelism.
	CheckpointAfterRescale = "checkpoint-after-rescale"
	// AdoptUnrecorded (scheduler): a new leader adopts whatever attempt of
	// a subtask a TaskManager reports, not only the one the previous
	// leader recorded as current: an attempt it had replaced (its
	// TaskManager lost, its output redone) runs on beside its successor.
	AdoptUnrecorded = "adopt-unrecorded"
)

// All lists the bugs that can be put back.
var All = []string{FinishingRacesRegionRestart, FinalNotifyOnce, CancelOvertakesDeploy, GraphBeforeRescale, DuplicateAckDiscards, UnalignedWhileUnstored, CheckpointAfterRescale, AdoptUnrecorded}
