package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// slowTaskManager is built once, on first use: a taskmanager with the
// test-only slow-forward operator (testdata/slowtm).
var slowTaskManager struct {
	once sync.Once
	err  error
}

func buildSlowTaskManager(t *testing.T) string {
	t.Helper()
	slowTaskManager.once.Do(func() {
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "slow-taskmanager"), "./testdata/slowtm")
		if out, err := cmd.CombinedOutput(); err != nil {
			slowTaskManager.err = fmt.Errorf("building testdata/slowtm: %v\n%s", err, out)
		}
	})
	if slowTaskManager.err != nil {
		t.Fatal(slowTaskManager.err)
	}
	return "slow-taskmanager"
}

// writeSlowSpec writes the running-sum job with a slow stage before the
// sink: an unthrottled source fills every queue up to the slow stage.
// Every vertex after the source runs at parallelism p.
func writeSlowSpec(t *testing.T, path, out string, count int, delay time.Duration, unaligned bool, p int) string {
	t.Helper()
	spec := fmt.Sprintf(`name: running-sum-slow
checkpointing: {interval: 500ms, mode: exactly-once, timeout: 2s, unaligned: %v, tolerable-failed-checkpoints: 1000,
                retained: 3, externalized: retain-on-cancellation}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: %d, keys: 16}}
  - {name: sum, operator: keyed-sum, parallelism: %[3]d, inputs: [{from: source, partition: hash}]}
  - {name: slow, operator: slow-forward, parallelism: %[3]d, inputs: [{from: sum, partition: forward}], config: {delay: %[4]s}}
  - {name: sink, operator: file-sink, parallelism: %[3]d, inputs: [{from: slow, partition: forward}], config: {path: %[5]s}}
`, unaligned, count, p, delay, strconv.Quote(out))
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkpointSummary is what the test reports about one checkpoint.
func checkpointSummary(c *cluster, job string, cp *weirv1.CheckpointStats) string {
	api, ctx := c.client()
	d, err := api.GetCheckpoint(ctx, &weirv1.GetCheckpointRequest{JobId: job, CheckpointId: cp.GetId()})
	if err != nil {
		c.t.Fatal(err)
	}
	var align, delay time.Duration
	var persisted int64
	unaligned := 0
	for _, s := range d.GetSubtasks() {
		m := s.GetMetrics()
		align = max(align, time.Duration(m.GetAlignmentDurationMs())*time.Millisecond)
		delay = max(delay, time.Duration(m.GetStartDelayMs())*time.Millisecond)
		persisted += m.GetBytesPersistedDuringAlignment()
		if m.GetUnaligned() {
			unaligned++
		}
	}
	status := strings.TrimPrefix(cp.GetStatus().String(), "CHECKPOINT_STATUS_")
	if cp.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED {
		status += " (" + strings.TrimPrefix(cp.GetFailureReason().String(), "CHECKPOINT_FAILURE_REASON_") + ")"
	}
	return fmt.Sprintf("checkpoint %d %s: end to end %v, %d/%d subtasks acked; max alignment %v, max start delay %v, %d unaligned acks, %d bytes of channel state",
		cp.GetId(), status, time.Duration(cp.GetEndToEndDurationMs())*time.Millisecond, cp.GetNumAcknowledgedSubtasks(), cp.GetNumSubtasks(),
		align, delay, unaligned, persisted)
}

// TestUnalignedCheckpointsUnderBackpressure runs the running-sum job with a
// slow stage (1ms per record) on two TaskManagers with a 2s checkpoint
// timeout. Aligned, every checkpoint's barriers wait behind the full queues
// and the checkpoints expire; unaligned, they overtake them and complete.
// The unaligned run is then cancelled and resumed from its latest retained
// checkpoint, whose channel state holds records in flight: the committed
// output of both runs is exactly that of an undisturbed run.
func TestUnalignedCheckpointsUnderBackpressure(t *testing.T) {
	t.Parallel()
	const count, keys = 40000, 16
	c := startClusterWith(t, 2, buildSlowTaskManager(t))
	api, ctx := c.client()
	list := func(job string) *weirv1.ListCheckpointsResponse {
		l, err := api.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: job})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	// Aligned: the checkpoints time out.
	aligned := c.submit(writeSlowSpec(t, filepath.Join(c.dir, "aligned.yaml"), filepath.Join(c.dir, "out-aligned"), 0, time.Millisecond, false, 2))
	c.waitFor(time.Minute, "two aligned checkpoints to fail", func() (bool, error) {
		return list(aligned).GetCounts().GetFailed() >= 2, nil
	})
	l := list(aligned)
	var report []string
	for _, cp := range slices.Backward(l.GetHistory()) {
		if cp.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_IN_PROGRESS {
			continue
		}
		report = append(report, "aligned   "+checkpointSummary(c, aligned, cp))
		// The first checkpoint may be triggered before the queues filled.
		if cp.GetId() > 1 && cp.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED {
			t.Errorf("aligned checkpoint %d completed under back-pressure within the 2s timeout", cp.GetId())
		}
	}
	if r := l.GetLatestFailed().GetFailureReason(); r != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED {
		t.Errorf("aligned checkpoint failed with %s, want CHECKPOINT_EXPIRED", r)
	}
	if _, err := c.weir("job", "cancel", aligned); err != nil {
		t.Fatal(err)
	}
	c.waitJob(aligned, time.Minute)

	// Unaligned: the checkpoints complete, with records in flight.
	out := filepath.Join(c.dir, "out")
	first := c.submit(writeSlowSpec(t, filepath.Join(c.dir, "unaligned.yaml"), out, count, time.Millisecond, true, 2))
	c.waitFor(time.Minute, "three unaligned checkpoints", func() (bool, error) {
		return list(first).GetCounts().GetCompleted() >= 3, nil
	})
	// Per-subtask statistics are only kept while the job runs.
	for _, cp := range slices.Backward(list(first).GetHistory()) {
		if cp.GetStatus() != weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED {
			continue
		}
		report = append(report, "unaligned "+checkpointSummary(c, first, cp))
		d, err := api.GetCheckpoint(ctx, &weirv1.GetCheckpointRequest{JobId: first, CheckpointId: cp.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.GetSubtasks() {
			if !s.GetMetrics().GetUnaligned() {
				t.Errorf("checkpoint %d: subtask %s/%d acknowledged an aligned snapshot", cp.GetId(), s.GetVertex(), s.GetSubtaskIndex())
			}
		}
	}
	t.Logf("under back-pressure (2s checkpoint timeout):\n%s", strings.Join(report, "\n"))
	if _, err := c.weir("job", "cancel", first); err != nil {
		t.Fatal(err)
	}
	if job := c.waitJob(first, time.Minute); job.State != "CANCELED" {
		t.Fatalf("unaligned job ended %s: %s", job.State, job.FailureCause)
	}
	latest := list(first).GetLatestCompleted()
	// Channel state is in files, or inline in the metadata when small.
	md, err := storage.ReadMetadata(latest.GetExternalPath())
	if err != nil {
		t.Fatal(err)
	}
	channelState := 0
	for _, st := range md.GetSubtasks() {
		if storage.HasState(st.GetChannelState()) {
			channelState++
		}
	}
	if channelState == 0 {
		t.Fatalf("retained checkpoint %d holds no channel state: %s", latest.GetId(), latest.GetExternalPath())
	}
	committed, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) == 0 || len(committed) >= count {
		t.Fatalf("after the cancel %d records are committed; want some but not all of %d", len(committed), count)
	}

	// Resumed from the unaligned checkpoint (without the slow-down, to
	// finish quickly) with every vertex after the source at parallelism 3:
	// the records in flight are redistributed, recorded output goes out
	// first, recorded input is processed before new input.
	second := c.submit(writeSlowSpec(t, filepath.Join(c.dir, "resume.yaml"), out, count, 0, true, 3),
		"--from", filepath.Dir(latest.GetExternalPath()))
	if job := c.waitJob(second, 2*time.Minute); job.State != "FINISHED" {
		t.Fatalf("resumed job ended %s: %s", job.State, job.FailureCause)
	}
	if r := list(second).GetLatestRestored(); r.GetId() != latest.GetId() {
		t.Errorf("resumed job restored checkpoint %d, want %d", r.GetId(), latest.GetId())
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed from checkpoint %d (channel state of %d subtasks); %d records committed exactly once", latest.GetId(), channelState, len(lines))
}
