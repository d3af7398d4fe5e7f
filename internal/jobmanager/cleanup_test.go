package jobmanager

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// plantJobDir lays out a job directory with one retained checkpoint (3)
// and the debris of aborted and in-flight ones around it.
func plantJobDir(t *testing.T) (jobDir string, mdPaths []string, retained []*weirv1.CheckpointMetadata) {
	t.Helper()
	jobDir = filepath.Join(t.TempDir(), "job")
	write := func(rel string) string {
		p := filepath.Join(jobDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	md := &weirv1.CheckpointMetadata{CheckpointId: 3, Subtasks: []*weirv1.SubtaskState{{
		KeyedState:    &weirv1.StateHandle{Path: write("chk-3/op-0.keyed")},
		OperatorState: &weirv1.StateHandle{Path: write("chk-3/op-0.operator")},
		SharedFiles: []*weirv1.StateHandle{
			{Path: write("chk-3/op-0.pebble/MANIFEST-000001")},
			{Path: write("shared/aa_2_000004.sst"), Shared: true}, // uploaded by 2, still used
			{Path: write("shared/aa_3_000007.sst"), Shared: true},
		},
	}, {
		// Below the inline threshold: the state is in _metadata, so a
		// file under its name is an orphan, not this subtask's state.
		KeyedState:    &weirv1.StateHandle{InlineData: []byte("k"), Size: 1},
		OperatorState: &weirv1.StateHandle{InlineData: []byte("o"), Size: 1},
		ChannelState:  &weirv1.StateHandle{InlineData: []byte("c"), Size: 1},
	}}}
	mdPaths = []string{write("chk-3/_metadata")}
	for _, orphan := range []string{
		"chk-1/op-0.keyed",                  // aborted, older
		"chk-3/op-1.keyed.tmp",              // a partial write next to a retained checkpoint
		"chk-3/op-2.keyed",                  // an earlier attempt's file; the retained state is inline
		"chk-4/op-0.pebble/MANIFEST-000009", // in flight at the stop
		"shared/aa_4_000009.sst",            // uploaded by the one in flight
		"shared/bb_2_000003.sst.tmp",        // a partial upload of an aborted one
		"taskowned/whatever",                // nothing references it
	} {
		write(orphan)
	}
	if err := os.MkdirAll(filepath.Join(jobDir, "chk-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("savepoints/savepoint-1/_metadata") // not the checkpoint layout
	write("README")
	return jobDir, mdPaths, []*weirv1.CheckpointMetadata{md}
}

func relAll(t *testing.T, root string, paths []string) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		out = append(out, strings.TrimPrefix(p, abs+string(filepath.Separator)))
	}
	return strings.Join(out, " ")
}

func TestUnreferencedFindsPlantedOrphans(t *testing.T) {
	jobDir, mds, retained := plantJobDir(t)
	got, err := Unreferenced(jobDir, mds, retained, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "chk-1/op-0.keyed chk-3/op-1.keyed.tmp chk-3/op-2.keyed chk-4/op-0.pebble/MANIFEST-000009 shared/aa_4_000009.sst shared/bb_2_000003.sst.tmp taskowned/whatever"
	if s := relAll(t, jobDir, got); s != want {
		t.Fatalf("unreferenced:\n got %s\nwant %s", s, want)
	}
	// Up to checkpoint 3 only: what checkpoint 4 wrote may still complete.
	got, err = Unreferenced(jobDir, mds, retained, 3)
	if err != nil {
		t.Fatal(err)
	}
	want = "chk-1/op-0.keyed chk-3/op-1.keyed.tmp chk-3/op-2.keyed shared/bb_2_000003.sst.tmp"
	if s := relAll(t, jobDir, got); s != want {
		t.Fatalf("unreferenced up to 3:\n got %s\nwant %s", s, want)
	}
}

func TestSweepUnreferencedKeepsRetained(t *testing.T) {
	jobDir, mds, retained := plantJobDir(t)
	removed, err := SweepUnreferenced(jobDir, mds, retained, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 7 {
		t.Fatalf("removed %v", removed)
	}
	left, err := Unreferenced(jobDir, mds, retained, 0)
	if err != nil || len(left) != 0 {
		t.Fatalf("left %v %v", left, err)
	}
	for _, keep := range []string{"chk-3/_metadata", "chk-3/op-0.keyed", "chk-3/op-0.pebble/MANIFEST-000001", "shared/aa_2_000004.sst", "savepoints/savepoint-1/_metadata", "README"} {
		if _, err := os.Stat(filepath.Join(jobDir, keep)); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
	for _, gone := range []string{"chk-1", "chk-2", "chk-4"} {
		if _, err := os.Stat(filepath.Join(jobDir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(jobDir, "shared")); err != nil {
		t.Errorf("shared/ removed: %v", err)
	}
	// A job directory that does not exist (discarded) has nothing to sweep.
	if got, err := SweepUnreferenced(filepath.Join(jobDir, "absent"), nil, nil, 0); err != nil || len(got) != 0 {
		t.Fatalf("absent dir: %v %v", got, err)
	}
}

// listStore is a completed-checkpoint store that only lists.
type listStore struct {
	checkpointStore
	all []checkpoint.Completed
}

func (s listStore) All(context.Context) ([]checkpoint.Completed, error) { return s.all, nil }

// TestSweepOnlyWhileLeading: a JobManager that lost its leadership while a
// job ended here does not sweep the job's checkpoint directory: the new
// leader recovered the job, and its checkpoints, which the list read here
// lacks, would lose their files.
func TestSweepOnlyWhileLeading(t *testing.T) {
	jobDir, mdPaths, retained := plantJobDir(t)
	// A readable _metadata: the sweep reads what it must keep.
	if err := os.Remove(mdPaths[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.WriteMetadata(filepath.Dir(mdPaths[0]), retained[0]); err != nil {
		t.Fatal(err)
	}
	s := &Server{storage: storage.Storage{Dir: filepath.Dir(jobDir)}, log: slog.New(slog.DiscardHandler)}
	j := &jobMaster{s: s, id: filepath.Base(jobDir), log: s.log,
		store: listStore{all: []checkpoint.Completed{{ID: 3, MetadataPath: mdPaths[0]}}}}
	orphan := filepath.Join(jobDir, "chk-4/op-0.pebble/MANIFEST-000009")
	j.sweepCheckpoints("test", 0)
	if _, err := os.Stat(orphan); err != nil {
		t.Fatalf("a deposed leader swept: %v", err)
	}
	s.leading.Store(true)
	j.sweepCheckpoints("test", 0)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the leader did not sweep: %v", err)
	}
}
