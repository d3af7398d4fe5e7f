// Package fault holds Weir's fault points: named places on the path of a
// checkpoint where a test can make the process crash, fail or stall.
//
// Fault points cost nothing in production: normal builds compile Point to
// a function that returns nil. Builds with the failpoints tag (make test,
// the end-to-end tests and make chaos build the daemons that way) evaluate
// them with go.etcd.io/gofail's runtime, the failpoint library etcd uses,
// so they are set the way etcd's are:
//
//   - at start, from the environment:
//     GOFAIL_FAILPOINTS='sinkBeforeCommit=1*return("crash");taskBeforeAck=sleep(500)'
//   - while running, over HTTP when GOFAIL_HTTP=127.0.0.1:PORT is set:
//     curl -X PUT -d 'return("error")' http://127.0.0.1:PORT/jmAfterStoreBeforeNotify
//   - in a test of the same process, with Enable and Disable.
//
// A point's terms pick the fault: return("crash") kills the process with
// SIGKILL on the spot (no deferred function, no flush: a power cut as the
// process sees it); return("error") (or any other value) makes Point return
// an error wrapping ErrInjected; sleep(ms) delays the caller; gofail's
// modifiers apply (2*return("crash") fires twice, 10%return("error") in one
// call of ten). Every firing is logged before it acts.
package fault

import "errors"

// ErrInjected is the error a fault point returns when told to fail.
var ErrInjected = errors.New("fault: injected failure")

// The fault points, in the order a checkpoint meets them.
const (
	// JMBetweenTriggers: the JobManager sent TriggerCheckpoint to some of
	// the sources and not yet to the next one (a delay here skews the
	// sources' barriers against each other).
	JMBetweenTriggers = "jmBetweenTriggers"

	// TaskBeforeAck: a subtask took its snapshot (synchronous and
	// asynchronous parts) and is about to acknowledge it.
	TaskBeforeAck = "taskBeforeAck"
	// IncrementalUpload: an incremental checkpoint is uploading its new
	// shared files (fires before each file, so a crash may leave some of
	// them uploaded).
	IncrementalUpload = "incrementalUpload"
	// JMAfterMetadataBeforeStore: the JobManager wrote a checkpoint's
	// _metadata and has not yet added it to the completed-checkpoint store.
	JMAfterMetadataBeforeStore = "jmAfterMetadataBeforeStore"
	// JMAfterStoreBeforeNotify: the checkpoint is in the store; no
	// NotifyCheckpointComplete has been sent yet.
	JMAfterStoreBeforeNotify = "jmAfterStoreBeforeNotify"
	// SinkBeforeCommit: a NotifyCheckpointComplete reached a sink, which
	// has not started to commit.
	SinkBeforeCommit = "sinkBeforeCommit"
	// SinkMidCommit: a sink is in the middle of a commit. The file sink:
	// an epoch's file was renamed into place, the directory not yet
	// fsynced (so the commit is visible but not durable), and any later
	// epochs the same notification covers are still pending. The Kafka
	// sink: a transaction was committed, the subtask's later ones and the
	// other subtasks' not yet.
	SinkMidCommit = "sinkMidCommit"
	// RestoreDownload: a subtask is reading its state back from checkpoint
	// storage on restore (fires before each file read; state small enough
	// to travel inline in the metadata reads no file).
	RestoreDownload = "restoreDownload"
)

// JMStoreJob: the JobManager is about to store a job's graph in etcd (a
// submit, a rescale, a change of checkpointing). In Others, not Points: it
// is on no checkpoint's path, so the fault matrix does not run it.
const JMStoreJob = "jmStoreJob"

// Others lists the fault points off a checkpoint's path.
var Others = []string{JMStoreJob}

// Points lists every fault point on a checkpoint's path.
var Points = []string{
	JMBetweenTriggers, TaskBeforeAck, IncrementalUpload, JMAfterMetadataBeforeStore, JMAfterStoreBeforeNotify,
	SinkBeforeCommit, SinkMidCommit, RestoreDownload,
}
