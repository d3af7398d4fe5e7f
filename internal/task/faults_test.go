package task

import (
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/fault"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// enable turns fault point name on with terms for the rest of the test.
func enable(t *testing.T, name, terms string) {
	t.Helper()
	if !fault.Compiled {
		t.Skip("needs -tags failpoints")
	}
	if err := fault.Enable(name, terms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fault.Disable(name); err != nil {
			t.Error(err)
		}
	})
}

// wantInjectedDecline checks that exactly one subtask, vertex's, declined
// with the injected failure and the others acknowledged.
func wantInjectedDecline(t *testing.T, id int64, vertex string, acks []*weirv1.AcknowledgeCheckpointRequest, declines []*weirv1.DeclineCheckpointRequest) {
	t.Helper()
	if len(declines) != 1 || (vertex != "" && declines[0].GetAttempt().GetVertex() != vertex) ||
		!strings.Contains(declines[0].GetMessage(), fault.ErrInjected.Error()) {
		t.Fatalf("checkpoint %d: acks %v, declines %v; want one decline with the injected failure", id, acks, declines)
	}
}

// A failure after the snapshot and before the acknowledgement declines the
// checkpoint; the subtask goes on and acknowledges the next one.
func TestFaultTaskBeforeAckDeclines(t *testing.T) {
	enable(t, fault.TaskBeforeAck, `1*return("error")`)
	e := startFailJob(t, t.TempDir(), failJob{parallelism: 1})
	e.waitProcessed(10)
	acks, declines := e.checkpoint(1, 2)
	wantInjectedDecline(t, 1, "", acks, declines)
	if acks, declines := e.checkpoint(2, 2); len(acks) != 2 {
		t.Fatalf("checkpoint 2: acks %v, declines %v", acks, declines)
	}
	e.running("src/0")
	e.running("count/0")
}

// incrementalJob runs the job on incremental Pebble with 1 MiB values,
// so the store flushes several SST files between two checkpoints.
func incrementalJob(dir string) failJob {
	return failJob{
		parallelism: 1, backend: weirv1.StateBackendConfig_BACKEND_PEBBLE, incremental: true,
		config: map[string]any{"pad": 1 << 20},
	}
}

// A failure between two uploads of an incremental checkpoint declines it.
func TestFaultIncrementalUploadDeclines(t *testing.T) {
	dir := t.TempDir()
	e := startFailJob(t, dir, incrementalJob(dir))
	e.waitProcessed(24)
	enable(t, fault.IncrementalUpload, `return("error")`)
	acks, declines := e.checkpoint(1, 2)
	wantInjectedDecline(t, 1, "count", acks, declines)
	if err := fault.Disable(fault.IncrementalUpload); err != nil {
		t.Fatal(err)
	}
	if acks, declines := e.checkpoint(2, 2); len(acks) != 2 {
		t.Fatalf("checkpoint 2: acks %v, declines %v", acks, declines)
	}
	e.running("count/0")
}

// A failure between two files a subtask reads back on restore fails the
// restore, and so the subtask; without it the same restore succeeds.
func TestFaultRestoreDownloadFailsSubtask(t *testing.T) {
	dir := t.TempDir()
	e := startFailJob(t, dir, incrementalJob(dir))
	e.waitProcessed(24)
	acks, declines := e.checkpoint(1, 2)
	if len(acks) != 2 {
		t.Fatalf("checkpoint 1: acks %v, declines %v", acks, declines)
	}
	e.stop()
	restore := map[string][]*weirv1.SubtaskState{}
	for _, a := range acks {
		restore[a.GetAttempt().GetVertex()] = append(restore[a.GetAttempt().GetVertex()], a.GetState())
	}
	if n := len(restore["count"][0].GetSharedFiles()); n < 2 {
		t.Fatalf("count's state has %d files; the test needs several", n)
	}
	o := incrementalJob(dir)
	o.restore, o.restoreID = restore, 1

	enable(t, fault.RestoreDownload, `return("error")`)
	failed := startFailJob(t, dir, o)
	if err := failed.failure("count/0"); !strings.Contains(err.Error(), fault.ErrInjected.Error()) {
		t.Fatalf("failure cause %q is not the injected failure", err)
	}
	failed.stop()
	if err := fault.Disable(fault.RestoreDownload); err != nil {
		t.Fatal(err)
	}
	restored := startFailJob(t, dir, o)
	restored.waitProcessed(1)
	restored.running("count/0")
}
