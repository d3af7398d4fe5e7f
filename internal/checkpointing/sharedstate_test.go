package checkpointing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/coordinator"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// An ack that references a shared file deleted when an older checkpoint was
// subsumed makes its checkpoint fail, declined with the file named, instead
// of completing a checkpoint that cannot be restored; the ack's own new
// upload is deleted with it.
func TestDriverRefusesAckOfDeletedSharedFile(t *testing.T) {
	e := newDriverEnv(t, testConfig(), nil, nil)
	e.d.Start(e.tasks)
	shared := filepath.Join(e.storage.root, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	upload := func(name string) string {
		p := filepath.Join(shared, name)
		if err := os.WriteFile(p, []byte("sst"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// checkpoint acks src/0 with the shared files given, the others with
	// exclusive state only.
	checkpoint := func(id int64, files ...string) Result {
		t.Helper()
		res := e.trigger(coordinator.Manual, "")
		e.triggered(id, "CHECKPOINT")
		keyed := filepath.Join(e.chk(id), "src-0.keyed")
		if err := os.WriteFile(keyed, []byte("state"), 0o644); err != nil {
			t.Fatal(err)
		}
		st := &weirv1.SubtaskState{Vertex: "src", KeyedState: &weirv1.StateHandle{Path: keyed, Size: 5}}
		for _, f := range files {
			st.SharedFiles = append(st.SharedFiles, &weirv1.StateHandle{Path: f, Size: 3, Shared: true})
		}
		e.d.Acknowledge(&weirv1.AcknowledgeCheckpointRequest{Attempt: e.tasks[0].Attempt, CheckpointId: id, State: st})
		for _, task := range e.tasks[1:] {
			e.ack(task, id, e.chk(id))
		}
		return waitResult(t, res)
	}
	s1 := upload("a_1_000005.sst")
	if r := checkpoint(1, s1); r.Err != nil {
		t.Fatal(r.Err)
	}
	s2 := upload("a_2_000007.sst")
	if r := checkpoint(2, s2); r.Err != nil { // subsumes 1, and s1 with it
		t.Fatal(r.Err)
	}
	e.rec.waitFor(t, "discard chk-1")
	wantGone(t, s1)

	s3 := upload("a_3_000009.sst")
	r := checkpoint(3, s1, s3)
	wantFailure(t, r, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED)
	if !strings.Contains(r.Err.Error(), s1) {
		t.Fatalf("the failure does not name the deleted file: %v", r.Err)
	}
	e.aborted(3)
	e.rec.waitFor(t, "discard chk-3", "discard-state chk-3/src-0.keyed") // the shared files go first
	wantGone(t, s3)
	if _, err := os.Stat(s2); err != nil {
		t.Fatalf("the retained checkpoint's file: %v", err)
	}
	if st := e.d.Stats(); st.GetLatestCompleted().GetId() != 2 {
		t.Fatalf("latest completed %d, want 2", st.GetLatestCompleted().GetId())
	}
}
