package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestIncrementalPebbleNoOrphans runs the running-sum job on the Pebble
// backend with incremental checkpoints every 100ms and a 3s timeout (some
// expire on a loaded machine), through many checkpoints, a full checkpoint, a
// TaskManager SIGKILL and failover, and cancels it retaining its
// checkpoints. Then every file in the job's checkpoint directory must be
// referenced by a retained checkpoint's metadata: what the subtasks wrote
// for aborted and in-flight checkpoints is gone.
func TestIncrementalPebbleNoOrphans(t *testing.T) {
	t.Parallel()
	for _, storage := range storages {
		t.Run(storage, func(t *testing.T) { incrementalPebbleNoOrphans(t, storage) })
	}
}

func incrementalPebbleNoOrphans(t *testing.T, storage string) {
	const count, keys = 1000000, 2000
	c := startClusterOn(t, 3, "taskmanager", storage)
	out := filepath.Join(c.dir, "out")
	spec := writeSpec(t, c.dir, out, count, keys, 1500, "100ms")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	withState := strings.Replace(string(b), "vertices:", "restart-strategy: {type: fixed-delay, attempts: 100, delay: 100ms}\nstate: {backend: pebble, incremental: true}\nvertices:", 1)
	withState = strings.Replace(withState, "timeout: 1m, retained: 3}", "timeout: 3s, tolerable-failed-checkpoints: 1000, retained: 3, externalized: retain-on-cancellation}", 1)
	if err := os.WriteFile(spec, []byte(withState), 0o644); err != nil {
		t.Fatal(err)
	}
	id := c.submit(spec)
	completedAtLeast := func(n int) func() (bool, error) {
		return func() (bool, error) {
			done, err := c.checkpointsCompleted(id)
			return done >= n, err
		}
	}
	c.waitFor(3*time.Minute, "10 completed checkpoints", completedAtLeast(10))

	var victim *process
	for _, p := range c.procs {
		if strings.Contains(strings.Join(p.Cmd.Args, " "), "--id tm-0") {
			victim = p
		}
	}
	c.kill(victim)
	c.startTaskManager("taskmanager", "tm-replacement")
	before, err := c.checkpointsCompleted(id)
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(3*time.Minute, "10 more checkpoints after the failover", completedAtLeast(before+10))

	// A full checkpoint uploads everything: every subtask's checkpointed
	// size is its state size. Retried: one may expire.
	var full checkpointDetail
	c.waitFor(2*time.Minute, "a full checkpoint", func() (bool, error) {
		res, err := c.weir("checkpoint", "trigger", id, "--full")
		if err != nil {
			return false, nil
		}
		var cp int64
		if _, err := fmt.Sscanf(string(res), "%d", &cp); err != nil {
			return false, fmt.Errorf("trigger output %q: %v", res, err)
		}
		return true, c.weirJSON(&full, "checkpoint", "get", id, fmt.Sprint(cp))
	})
	var fullSize int64
	for _, s := range full.Subtasks {
		fullSize += s.StateSize
		if s.CheckpointedSize != s.StateSize {
			t.Errorf("full checkpoint %d: %s/%d checkpointed %d of %d bytes", full.ID, s.Vertex, s.Index, s.CheckpointedSize, s.StateSize)
		}
	}
	if fullSize == 0 {
		t.Errorf("full checkpoint %d has no state", full.ID)
	}
	more, err := c.checkpointsCompleted(id)
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(2*time.Minute, "3 more checkpoints", completedAtLeast(more+3))
	var counts checkpointCounts
	if err := c.weirJSON(&counts, "checkpoint", "list", id); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoints: %d completed, %d failed", counts.Counts.Completed, counts.Counts.Failed)

	if _, err := c.weir("job", "cancel", id); err != nil {
		t.Fatal(err)
	}
	job := c.waitJob(id, time.Minute)
	if job.State != "CANCELED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if _, err := check.ReadCommitted(out); err != nil {
		t.Fatal(err)
	}

	// The JobManager sweeps once the job is CANCELED (it reports the state
	// first), and the coordinator's discards run off its loop: wait for
	// the directory to settle.
	jobDir := blob.Join(c.checkpointDir(), id)
	var orphans []string
	var report orphanReport
	deadline := time.Now().Add(15 * time.Second)
	for {
		report, err = orphansIn(jobDir)
		if err != nil {
			t.Fatal(err)
		}
		orphans = report.orphans
		if len(orphans) == 0 || time.Now().After(deadline) {
			break
		}
		<-time.After(100 * time.Millisecond) // polling the directory: no event tells the test
	}
	for _, r := range report.retained {
		t.Logf("retained %s", r)
	}
	t.Logf("%d retained checkpoints, %d files in shared/, %d shared references", len(report.retained), report.sharedFiles, report.sharedRefs)
	if len(report.retained) == 0 {
		t.Fatal("no retained checkpoint")
	}
	if report.sharedRefs == 0 {
		t.Fatal("retained checkpoints reference no shared file: not incremental")
	}
	if len(orphans) > 0 {
		t.Fatalf("%d files not referenced by a retained checkpoint: %v", len(orphans), orphans)
	}
}

type checkpointDetail struct {
	ID       int64 `json:"id"`
	Subtasks []struct {
		Vertex           string `json:"vertex"`
		Index            int32  `json:"index"`
		StateSize        int64  `json:"state_size"`
		CheckpointedSize int64  `json:"checkpointed_size"`
	} `json:"subtasks"`
}

type checkpointCounts struct {
	Counts struct {
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"counts"`
}

type orphanReport struct {
	retained    []string // one line per retained checkpoint
	orphans     []string // relative to the job directory, sorted
	sharedFiles int
	sharedRefs  int
}

// orphansIn lists the files of a job's checkpoint directory (on disk or
// in a bucket) that no retained checkpoint (a chk-<n> with a _metadata
// file) references. It reads the metadata itself rather than asking the
// JobManager, so it checks the JobManager's sweep rather than repeating
// it.
func orphansIn(jobDir string) (orphanReport, error) {
	var r orphanReport
	st, err := blob.Open(jobDir)
	if err != nil {
		return r, err
	}
	var all []string
	for info, err := range st.List(context.Background(), jobDir) {
		if err != nil {
			return r, err
		}
		all = append(all, info.Location)
	}
	rel := func(loc string) string {
		return filepath.ToSlash(strings.TrimPrefix(strings.TrimPrefix(loc, jobDir), string(filepath.Separator)))
	}
	referenced := map[string]bool{}
	for _, p := range all {
		parts := strings.Split(strings.TrimPrefix(rel(p), "/"), "/")
		if len(parts) != 2 || !strings.HasPrefix(parts[0], "chk-") || parts[1] != storage.MetadataFile {
			continue
		}
		referenced[rel(p)] = true
		md, err := storage.ReadMetadata(p)
		if err != nil {
			return r, err
		}
		var full, incr int64
		for _, st := range md.GetSubtasks() {
			full += st.GetStateSize()
			incr += st.GetCheckpointedSize()
			for _, h := range append(st.GetSharedFiles(), st.GetKeyedState(), st.GetOperatorState(), st.GetChannelState()) {
				if h.GetPath() != "" {
					referenced[rel(h.GetPath())] = true
					if h.GetShared() {
						r.sharedRefs++
					}
				}
			}
		}
		r.retained = append(r.retained, fmt.Sprintf("%s: full %d bytes, checkpointed %d bytes", parts[0], full, incr))
	}
	for _, p := range all {
		name := strings.TrimPrefix(rel(p), "/")
		if strings.HasPrefix(name, "shared/") {
			r.sharedFiles++
		}
		if !referenced[rel(p)] {
			r.orphans = append(r.orphans, name)
		}
	}
	sort.Strings(r.orphans)
	return r, nil
}

// The orphan check must catch what it is there to catch: a file planted
// next to a retained checkpoint, in an aborted checkpoint's directory and
// in shared/.
func TestOrphanCheckFindsPlantedFiles(t *testing.T) {
	for _, where := range storages {
		t.Run(where, func(t *testing.T) {
			jobDir := t.TempDir()
			if where == "s3" {
				srv := blobtest.Fake(t)
				srv.MakeBucket(t, "weir-e2e")
				s3, err := s3blob.New(srv.Config)
				if err != nil {
					t.Fatal(err)
				}
				useDefaultS3(t, s3)
				jobDir = "s3://weir-e2e/checkpoints/job"
			}
			orphanCheckFindsPlantedFiles(t, jobDir)
		})
	}
}

func orphanCheckFindsPlantedFiles(t *testing.T, jobDir string) {
	ctx := context.Background()
	write := func(rel string) string {
		p := blob.Join(jobDir, rel)
		st, err := blob.Open(p)
		if err == nil {
			err = st.Mkdir(ctx, blob.Dir(p))
		}
		if err == nil {
			err = st.Put(ctx, p, strings.NewReader(rel), int64(len(rel)))
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	md := &weirv1.CheckpointMetadata{CheckpointId: 2, Subtasks: []*weirv1.SubtaskState{{
		KeyedState:  &weirv1.StateHandle{Path: write("chk-2/sum-0.keyed")},
		SharedFiles: []*weirv1.StateHandle{{Path: write("shared/a_1_000001.sst"), Shared: true}},
	}}}
	if _, err := storage.WriteMetadata(blob.Join(jobDir, "chk-2"), md); err != nil {
		t.Fatal(err)
	}
	if r, err := orphansIn(jobDir); err != nil || len(r.orphans) != 0 || r.sharedRefs != 1 {
		t.Fatalf("clean directory: %+v %v", r, err)
	}
	write("chk-2/sum-1.keyed")
	write("chk-3/sum-0.pebble/MANIFEST-000001")
	write("shared/a_3_000009.sst")
	r, err := orphansIn(jobDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.orphans, " "); got != "chk-2/sum-1.keyed chk-3/sum-0.pebble/MANIFEST-000001 shared/a_3_000009.sst" {
		t.Fatalf("orphans %q", got)
	}
}
