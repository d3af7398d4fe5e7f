package jobmanager

import (
	"context"
	"testing"
)

// TestSavepointDirsOfJobsDiffer: two jobs whose IDs share a prefix take
// savepoints with the same checkpoint ID into one target. Their
// directories must differ: an abort discards its directory, and named
// from a prefix of the job ID it was the other job's completed savepoint.
func TestSavepointDirsOfJobsDiffer(t *testing.T) {
	target := t.TempDir()
	s := &Server{cfg: Config{CheckpointDir: t.TempDir()}}
	a, err := jobStorage{j: &jobMaster{id: "0a1b2c3d4e5f0001", s: s}}.InitLocation(context.Background(), 7, true, target)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jobStorage{j: &jobMaster{id: "0a1b2c3d4e5f0002", s: s}}.InitLocation(context.Background(), 7, true, target)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("both jobs' savepoint 7 go to %s", a)
	}
}
