package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/check"
)

// checkpointsCompleted returns how many checkpoints of job completed.
func (c *cluster) checkpointsCompleted(id string) (int, error) {
	var cps struct {
		Counts struct {
			Completed int `json:"completed"`
		} `json:"counts"`
	}
	err := c.weirJSON(&cps, "checkpoint", "list", id)
	return cps.Counts.Completed, err
}

func (c *cluster) submit(spec string, args ...string) string {
	c.t.Helper()
	out, err := c.weir(append([]string{"job", "submit", "-f", spec}, args...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestStopWithSavepointAndResume stops a running job with a savepoint and
// resumes it from there into the same output: the committed output of both
// runs together must hold every record exactly once.
func TestStopWithSavepointAndResume(t *testing.T) {
	t.Parallel()
	for _, storage := range storages {
		t.Run(storage, func(t *testing.T) { stopWithSavepointAndResume(t, storage) })
	}
}

func stopWithSavepointAndResume(t *testing.T, storage string) {
	const count, keys = 30000, 16
	c := startClusterOn(t, 2, "taskmanager", storage)
	out := filepath.Join(c.dir, "out")
	spec := writeSpec(t, c.dir, out, count, keys, 2000, "300ms")

	savepoint := c.runThenStop(spec)
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || len(lines) >= count {
		t.Fatalf("after the stop %d records are committed; want some but not all of %d", len(lines), count)
	}

	second := c.submit(spec, "--from", savepoint)
	if job := c.waitJob(second, 2*time.Minute); job.State != "FINISHED" {
		t.Fatalf("resumed job ended %s: %s", job.State, job.FailureCause)
	}
	var cps struct {
		Latest struct {
			Restored struct {
				ID           int64  `json:"id"`
				ExternalPath string `json:"external_path"`
			} `json:"restored"`
		} `json:"latest"`
	}
	if err := c.weirJSON(&cps, "checkpoint", "list", second); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cps.Latest.Restored.ExternalPath, blob.Dir(savepoint)) || cps.Latest.Restored.ID == 0 {
		t.Errorf("resumed job reports restored %+v, want the savepoint %s", cps.Latest.Restored, savepoint)
	}
	lines, err = check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}

	// The savepoint served its purpose: dispose of it, once.
	if out, err := c.weir("savepoint", "dispose", savepoint); err != nil || !strings.Contains(string(out), "disposed") {
		t.Fatalf("savepoint dispose: %v: %s", err, out)
	}
	if c.exists(savepoint) {
		t.Errorf("savepoint %s still there after dispose", savepoint)
	}
	if _, err := c.weir("savepoint", "dispose", savepoint); err == nil || !strings.Contains(err.Error(), "no savepoint at") {
		t.Errorf("second dispose: err %v; want a not-found error", err)
	}
}

// TestResumeFromRetainedCheckpoint cancels a job that retains its
// checkpoints on cancellation and resumes from the latest one: what the
// cancelled run wrote after that checkpoint is rolled back, so the output
// of both runs again holds every record exactly once.
func TestResumeFromRetainedCheckpoint(t *testing.T) {
	t.Parallel()
	for _, storage := range storages {
		t.Run(storage, func(t *testing.T) { resumeFromRetainedCheckpoint(t, storage) })
	}
}

func resumeFromRetainedCheckpoint(t *testing.T, storage string) {
	const count, keys = 30000, 16
	c := startClusterOn(t, 2, "taskmanager", storage)
	out := filepath.Join(c.dir, "out")
	spec := writeSpec(t, c.dir, out, count, keys, 2000, "300ms")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	retain := strings.Replace(string(b), "retained: 3}", "retained: 3, externalized: retain-on-cancellation}", 1)
	if err := os.WriteFile(spec, []byte(retain), 0o644); err != nil {
		t.Fatal(err)
	}

	first := c.submit(spec)
	c.waitFor(time.Minute, "three checkpoints", func() (bool, error) {
		n, err := c.checkpointsCompleted(first)
		return n >= 3, err
	})
	if _, err := c.weir("job", "cancel", first); err != nil {
		t.Fatal(err)
	}
	if job := c.waitJob(first, time.Minute); job.State != "CANCELED" {
		t.Fatalf("job ended %s, want CANCELED", job.State)
	}
	var cps struct {
		Latest struct {
			Completed struct {
				ExternalPath string `json:"external_path"`
			} `json:"completed"`
		} `json:"latest"`
	}
	if err := c.weirJSON(&cps, "checkpoint", "list", first); err != nil {
		t.Fatal(err)
	}
	latest := cps.Latest.Completed.ExternalPath
	if !c.exists(latest) {
		t.Fatalf("retained checkpoint %s is gone after cancellation", latest)
	}

	// A checkpoint is not a savepoint: dispose refuses it and deletes nothing.
	if _, err := c.weir("savepoint", "dispose", latest); err == nil || !strings.Contains(err.Error(), "not a savepoint") {
		t.Errorf("dispose of a checkpoint: err %v; want a refusal", err)
	}
	if !c.exists(latest) {
		t.Fatalf("dispose deleted checkpoint %s", latest)
	}

	second := c.submit(spec, "--from", blob.Dir(latest))
	if job := c.waitJob(second, 2*time.Minute); job.State != "FINISHED" {
		t.Fatalf("resumed job ended %s: %s", job.State, job.FailureCause)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// TestRescaleFromSavepoint stops a job at parallelism 2 with a savepoint and
// resumes it at parallelism 3: keyed state follows its key groups, source
// splits are handed to the new subtasks, and the output of both runs holds
// every record exactly once.
func TestRescaleFromSavepoint(t *testing.T) {
	t.Parallel()
	for _, storage := range storages {
		t.Run(storage, func(t *testing.T) { rescaleFromSavepoint(t, storage) })
	}
}

func rescaleFromSavepoint(t *testing.T, storage string) {
	const count, keys = 30000, 16
	c := startClusterOn(t, 3, "taskmanager", storage)
	out := filepath.Join(c.dir, "out")
	spec := writeSpec(t, c.dir, out, count, keys, 2000, "300ms")
	savepoint := c.runThenStop(spec)
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	rescaled := filepath.Join(c.dir, "rescaled.yaml")
	if err := os.WriteFile(rescaled, []byte(strings.ReplaceAll(string(b), "parallelism: 2", "parallelism: 3")), 0o644); err != nil {
		t.Fatal(err)
	}
	second := c.submit(rescaled, "--from", savepoint)
	if job := c.waitJob(second, 2*time.Minute); job.State != "FINISHED" {
		t.Fatalf("rescaled job ended %s: %s", job.State, job.FailureCause)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// runThenStop submits spec, lets it complete two checkpoints, stops it with
// a savepoint and returns the savepoint's path once the job FINISHED.
func (c *cluster) runThenStop(spec string) string {
	c.t.Helper()
	return c.runThenStopWhen(spec, "two checkpoints", func(id string) (bool, error) {
		n, err := c.checkpointsCompleted(id)
		return n >= 2, err
	})
}

// runThenStopWhen is runThenStop once ready holds for the job.
func (c *cluster) runThenStopWhen(spec, what string, ready func(id string) (bool, error)) string {
	c.t.Helper()
	first := c.submit(spec)
	c.waitFor(time.Minute, what, func() (bool, error) { return ready(first) })
	stopped, err := c.weir("job", "stop", first, "--savepoint-dir", c.savepointDir())
	if err != nil {
		c.t.Fatal(err)
	}
	fields := strings.Fields(string(stopped))
	if len(fields) != 2 {
		c.t.Fatalf("job stop printed %q, want ID and path", stopped)
	}
	if job := c.waitJob(first, time.Minute); job.State != "FINISHED" {
		c.t.Fatalf("stopped job ended %s: %s", job.State, job.FailureCause)
	}
	return fields[1]
}
