package state

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// incrementalJob plays the JobManager's side of incremental checkpoints
// for one Pebble backend: the shared-state registry, one retained
// checkpoint, and the deletion of the shared files a subsumed checkpoint
// leaves unreferenced.
type incrementalJob struct {
	t        *testing.T
	b        Backend
	root     string
	reg      *coordinator.SharedRegistry
	retained int64
	states   map[int64]*weirv1.SubtaskState
}

func newIncrementalJob(t *testing.T) *incrementalJob {
	root := t.TempDir()
	return &incrementalJob{
		t: t, b: newBackend(t, kinds[2], filepath.Join(root, "shared"), 1, 0), root: root,
		reg: coordinator.NewSharedRegistry(), states: map[int64]*weirv1.SubtaskState{},
	}
}

// keyIn is a key of key group kg. Checkpoint n writes one in key group n,
// so every checkpoint flushes an SST file that overlaps no other and
// compactions leave them alone: the files a checkpoint uploads stay in
// the store for the checkpoints after it.
func keyIn(kg int) []byte {
	for i := 0; ; i++ {
		if k := []byte(fmt.Sprintf("key-%06d", i)); keygroup.Of(k, confMaxP) == kg {
			return k
		}
	}
}

// snapshot takes and writes checkpoint id after writing a key of its own
// (a new SST file), and registers its files as the ack would.
func (j *incrementalJob) snapshot(id int64) { j.t.Helper(); j.take(id, SnapshotOptions{}) }

// snapshotFull takes a full checkpoint: it references no earlier file.
func (j *incrementalJob) snapshotFull(id int64) {
	j.t.Helper()
	j.take(id, SnapshotOptions{Full: true})
}

func (j *incrementalJob) take(id int64, opts SnapshotOptions) {
	j.t.Helper()
	j.b.SetCurrentKey(keyIn(int(id)))
	j.b.ValueState("v").Update([]byte(fmt.Sprint(id)))
	dir := filepath.Join(j.root, fmt.Sprintf("chk-%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		j.t.Fatal(err)
	}
	opts.CheckpointID = id
	s, err := j.b.TakeSnapshot(opts)
	if err != nil {
		j.t.Fatal(err)
	}
	st, err := s.Write(dir, "op", 0, 1)
	if err != nil {
		j.t.Fatal(err)
	}
	if err := j.reg.Register(id, st); err != nil {
		j.t.Fatalf("checkpoint %d refused: %v", id, err)
	}
	j.states[id] = st
}

// complete makes id the retained checkpoint and deletes the files of the
// one it subsumes that nothing references any more.
func (j *incrementalJob) complete(id int64) {
	j.t.Helper()
	if j.retained != 0 {
		for _, p := range j.reg.Release(j.retained) {
			if err := os.Remove(p); err != nil {
				j.t.Fatal(err)
			}
		}
	}
	j.retained = id
}

// restorable restores checkpoint id into a fresh backend and reads a key
// of every checkpoint up to it.
func (j *incrementalJob) restorable(id int64) {
	j.t.Helper()
	r := newBackend(j.t, kinds[2], filepath.Join(j.root, "shared"), 1, 0)
	if err := r.Restore([]*weirv1.SubtaskState{j.states[id]}, 0, 1); err != nil {
		j.t.Fatalf("checkpoint %d is not restorable: %v", id, err)
	}
	for c := int64(1); c <= id; c++ {
		r.SetCurrentKey(keyIn(int(c)))
		if v, _ := r.ValueState("v").Value(); string(v) != fmt.Sprint(c) {
			j.t.Fatalf("checkpoint %d restored %q for a key of checkpoint %d", id, v, c)
		}
	}
}

// A completion notification that arrives after the next snapshot was
// taken must not make the backend reuse files that the checkpoint taken
// in between does not reference: that checkpoint subsumes the late one,
// and their files go with it.
func TestPebbleLateNotifyKeepsReferencesAlive(t *testing.T) {
	j := newIncrementalJob(t)
	j.snapshot(1)
	j.complete(1)
	j.b.NotifyCheckpointComplete(1)
	j.snapshot(2)
	j.complete(2) // its notification comes late
	j.snapshot(3)
	j.b.NotifyCheckpointComplete(2)
	j.complete(3) // subsumes 2
	j.snapshot(4)
	j.restorable(4)
	j.b.NotifyCheckpointComplete(3)
	j.complete(4)
	j.b.NotifyCheckpointComplete(4)
	j.snapshot(5)
	j.restorable(5)
}

// An aborted checkpoint taken after the last completed one no longer
// holds back the reuse of that checkpoint's files.
func TestPebbleAbortedCheckpointDoesNotLimitReuse(t *testing.T) {
	j := newIncrementalJob(t)
	j.snapshot(1)
	j.complete(1)
	j.b.NotifyCheckpointComplete(1)
	j.b.SetCurrentKey(keyIn(2))
	j.b.ValueState("big").Update(make([]byte, 1<<20)) // most of the state, in checkpoint 2's files
	j.snapshot(2)
	j.complete(2)
	j.b.NotifyCheckpointComplete(2)
	j.snapshotFull(3) // references none of checkpoint 2's files; aborted
	j.b.NotifyCheckpointAborted(3)
	for _, p := range j.reg.Release(3) {
		os.Remove(p)
	}
	j.snapshot(4)
	reused := 0
	for p := range sharedHandles(j.states[4]) {
		if sharedHandles(j.states[2])[p] {
			reused++
		}
	}
	if reused == 0 {
		t.Fatal("after an aborted checkpoint, the next one reuses none of the completed one's files")
	}
	j.complete(4)
	j.restorable(4)
}
