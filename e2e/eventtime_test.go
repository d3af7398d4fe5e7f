package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/window"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// The windowed job of these tests: sequence-source records with event
// time (1 ms apart, up to 20 ms out of order), a watermark 20 ms behind,
// hashed to a window operator, whose results file-sink commits as
// key,start,end,result lines. Every record of the bounded input falls in
// some window, and none is late (the jitter is within the watermark's
// out-of-orderness), so the committed output must equal a batch
// computation over the same records: check.Windows.
const (
	etStepMs   = 1
	etJitterMs = 20
)

type windowRun struct {
	name   string
	config map[string]any
}

var windowRuns = []windowRun{
	{"tumbling-count", map[string]any{"type": "tumbling", "size": "100ms", "aggregate": "count"}},
	{"sliding-sum", map[string]any{"type": "sliding", "size": "200ms", "slide": "50ms", "aggregate": "sum"}},
	{"session-count", map[string]any{"type": "session", "gap": "5ms", "aggregate": "count"}},
}

func (w windowRun) spec(t *testing.T) window.Spec {
	t.Helper()
	s, err := window.Parse(sdk.Config(w.config))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (w windowRun) yaml() string {
	var parts []string
	for _, k := range []string{"type", "size", "slide", "gap", "aggregate"} {
		if v, ok := w.config[k]; ok {
			parts = append(parts, fmt.Sprintf("%s: %v", k, v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// writeWindowSpec writes the windowed job's spec: the window at
// parallelism windowP, checkpointing in mode, restarting on failures.
func writeWindowSpec(t *testing.T, dir, out string, w windowRun, count, keys, rate, windowP int, mode string) string {
	t.Helper()
	spec := fmt.Sprintf(`name: windows-%s
checkpointing: {interval: 200ms, mode: %s, timeout: 1m, retained: 1}
restart-strategy: {type: fixed-delay, attempts: 1000, delay: 100ms}
vertices:
  - name: source
    operator: sequence-source
    parallelism: 2
    config: {count: %d, keys: %d, rate: %d, event-time: {step: %dms, jitter: %dms}}
    watermarks: {max-out-of-orderness: %dms, interval: 50ms}
  - {name: window, operator: window, parallelism: %d, inputs: [{from: source, partition: hash}], config: %s}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: window, partition: hash}], config: {path: %s}}
`, w.name, mode, count, keys, rate, etStepMs, etJitterMs, etJitterMs, windowP, w.yaml(), strconv.Quote(out))
	path := filepath.Join(dir, "windows-"+w.name+".yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func checkWindows(t *testing.T, out string, w windowRun, count, keys int) error {
	t.Helper()
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	want := check.BatchWindows(w.spec(t), check.SequenceRecords(int64(count), int64(keys), etStepMs, etJitterMs))
	if err := check.Windows(lines, want); err != nil {
		return err
	}
	t.Logf("%s: %d windows committed exactly once, each with the batch result", w.name, len(want))
	return nil
}

// killTaskManagers SIGKILLs a TaskManager each time the job completed
// two more checkpoints, kills times at most, and replaces it at once with
// one of the same binary. It stops early if the job ends first (a slow
// machine), returning the kills done.
func (c *cluster) killTaskManagers(id string, tms []*process, kills int) int {
	c.t.Helper()
	// Over gRPC, polled often: the CLI is too slow to start (with -race)
	// to catch a short job between its checkpoints.
	client, ctx := c.client()
	for k := 0; k < kills; k++ {
		before, ended := int64(0), false
		c.waitForFast(2*time.Minute, "two more checkpoints", func() (bool, error) {
			job, err := client.GetJob(ctx, &weirv1.GetJobRequest{JobId: id})
			if err != nil {
				return false, nil // the JobManager may be busy
			}
			switch job.GetJob().GetState() {
			case weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED:
				ended = true
				return true, nil
			}
			cps, err := client.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: id})
			if err != nil {
				return false, nil
			}
			n := cps.GetCounts().GetCompleted()
			if before == 0 {
				before = n + 2
			}
			return n >= before, nil
		})
		if ended {
			return k
		}
		i := k % len(tms)
		c.kill(tms[i])
		tms[i] = c.startTaskManager(tms[i].Name, fmt.Sprintf("tm-k%d", k))
	}
	return kills
}

// TestEventTimeWindowsUnderKills: each window type, TaskManagers killed
// twice mid-run (the job restarts from its last checkpoint with timers and
// window state restored): every (key, window) is committed exactly once
// with exactly the batch result.
func TestEventTimeWindowsUnderKills(t *testing.T) {
	t.Parallel()
	const count, keys, rate = 16000, 6, 2000
	for _, w := range windowRuns {
		t.Run(w.name, func(t *testing.T) {
			c := startCluster(t, 2)
			out := filepath.Join(c.dir, "out")
			id := c.submit(writeWindowSpec(t, c.dir, out, w, count, keys, rate, 2, "exactly-once"))
			tms := append([]*process(nil), c.procs[1:]...)
			kills := c.killTaskManagers(id, tms, 2)
			job := c.waitJob(id, 2*time.Minute)
			if job.State != "FINISHED" {
				t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
			}
			if kills == 0 || job.Restarts < kills {
				t.Fatalf("job restarted %d times after %d kills", job.Restarts, kills)
			}
			t.Logf("%s: %d restarts", w.name, job.Restarts)
			if err := checkWindows(t, out, w, count, keys); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEventTimeSavepointRescale stops a windowed job with a savepoint in
// the middle and resumes it with the window at parallelism 3: open
// windows and their timers follow their key groups, and the output of both
// runs together is the batch result.
func TestEventTimeSavepointRescale(t *testing.T) {
	t.Parallel()
	const count, keys, rate = 16000, 6, 1000
	w := windowRuns[1] // sliding: the most windows in flight at the stop
	c := startCluster(t, 2)
	out := filepath.Join(c.dir, "out")
	savepoint := c.runThenStop(writeWindowSpec(t, c.dir, out, w, count, keys, rate, 2, "exactly-once"))
	second := c.submit(writeWindowSpec(t, c.dir, out, w, count, keys, 0, 3, "exactly-once"), "--from", savepoint)
	if job := c.waitJob(second, 2*time.Minute); job.State != "FINISHED" {
		t.Fatalf("resumed job ended %s: %s", job.State, job.FailureCause)
	}
	if err := checkWindows(t, out, w, count, keys); err != nil {
		t.Fatal(err)
	}
}

// TestEventTimeCheckerBites: the same kills in at-least-once mode, with
// the checkpoint's second source triggered late (so records after the
// first source's barrier enter the snapshot and are replayed after the
// restore), must fail the window checker: it catches a broken run.
func TestEventTimeCheckerBites(t *testing.T) {
	t.Parallel()
	const count, keys, rate = 30000, 6, 3000
	w := windowRuns[0]
	c := startCluster(t, 3)
	out := filepath.Join(c.dir, "out")
	spec := writeWindowSpec(t, c.dir, out, w, count, keys, rate, 2, "at-least-once")
	c.setFault(c.procs[0], "jmBetweenTriggers", "1*sleep(500)")
	tms := append([]*process(nil), c.procs[1:]...)
	for _, p := range tms {
		c.setFault(p, "sinkBeforeCommit", `1*return("crash")`)
	}
	id := c.submit(spec)
	job, replaced := c.superviseTaskManagers(id, tms, 3*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if replaced == 0 {
		t.Fatal("no TaskManager crashed: the faults did not happen")
	}
	err := checkWindows(t, out, w, count, keys)
	if err == nil {
		t.Fatal("at-least-once output restored from a skewed checkpoint passed the window checker")
	}
	t.Logf("as expected, the checker rejects it: %v", err)
}

// whyAnswer is what GET /jobs/{id}/watermarks says of one vertex.
type whyAnswer struct {
	Name        string `json:"name"`
	Watermark   *int64 `json:"watermark"`
	Explanation string `json:"explanation"`
	HeldBy      []struct {
		Vertex  string `json:"vertex"`
		Subtask int    `json:"subtask"`
		Split   string `json:"split"`
	} `json:"held_back_by"`
	IdleInputs []struct {
		Vertex  string `json:"vertex"`
		Subtask int    `json:"subtask"`
		Split   string `json:"split"`
	} `json:"idle_inputs"`
}

func (c *cluster) why(id, vertex string) (whyAnswer, error) {
	resp, err := http.Get("http://" + c.jmHTTP + "/jobs/" + id + "/watermarks")
	if err != nil {
		return whyAnswer{}, err
	}
	defer resp.Body.Close()
	var all struct {
		Vertices []whyAnswer `json:"vertices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return whyAnswer{}, err
	}
	for _, v := range all.Vertices {
		if v.Name == vertex {
			return v, nil
		}
	}
	return whyAnswer{}, fmt.Errorf("no vertex %q in the answer", vertex)
}

// TestWhyNoWindowFires: a source of three partitions, one of which
// produces nothing (an idle Kafka partition, in real life). Without an
// idle timeout, the window never fires, and the REST API says why: its
// watermark is held back by that partition's split. With one, the split is
// reported idle, not holding anything back, and windows fire.
func TestWhyNoWindowFires(t *testing.T) {
	t.Parallel()
	for _, idle := range []string{"", "idle-timeout: 1s, "} {
		name := "no idle timeout"
		if idle != "" {
			name = "idle timeout"
		}
		t.Run(name, func(t *testing.T) {
			c := startClusterWith(t, 1, "event-time-taskmanager")
			out := filepath.Join(c.dir, "out")
			spec := filepath.Join(c.dir, "why.yaml")
			if err := os.WriteFile(spec, []byte(fmt.Sprintf(`name: why
checkpointing: {interval: 200ms}
vertices:
  - {name: source, operator: partitions, parallelism: 2, config: {rates: [200, 200, 0], keys: 4}, watermarks: {max-out-of-orderness: 10ms, %sinterval: 50ms}}
  - {name: window, operator: window, parallelism: 1, inputs: [{from: source, partition: hash}], config: {type: tumbling, size: 200ms}}
  - {name: sink, operator: file-sink, parallelism: 1, inputs: [{from: window, partition: forward}], config: {path: %s}}
`, idle, strconv.Quote(out))), 0o644); err != nil {
				t.Fatal(err)
			}
			id := c.submit(spec)
			var got whyAnswer
			c.waitFor(time.Minute, "the watermark answer", func() (bool, error) {
				var err error
				if got, err = c.why(id, "window"); err != nil {
					return false, nil
				}
				if idle == "" {
					return len(got.HeldBy) > 1, nil
				}
				return len(got.IdleInputs) > 0 && got.Watermark != nil, nil
			})
			t.Logf("GET /jobs/%s/watermarks, vertex window: %s", id, got.Explanation)
			if idle == "" {
				last := got.HeldBy[len(got.HeldBy)-1]
				if got.Watermark != nil || last.Vertex != "source" || last.Subtask != 0 || last.Split != "partition-2" ||
					!strings.Contains(got.Explanation, "source subtask 0 (split partition-2)") {
					t.Fatalf("answer %+v: want no watermark, held back by source subtask 0's split partition-2", got)
				}
				return
			}
			if in := got.IdleInputs[0]; in.Vertex != "source" || in.Subtask != 0 || in.Split != "partition-2" ||
				!strings.Contains(got.Explanation, "Idle, not holding it back: source subtask 0 split partition-2") {
				t.Fatalf("answer %+v: want split partition-2 of source subtask 0 idle", got)
			}
			c.waitFor(time.Minute, "windows committed", func() (bool, error) {
				lines, err := check.ReadCommitted(out)
				return len(lines) > 0, err
			})
		})
	}
}
