package e2e

// End-to-end tests that stop a checkpoint at a chosen step with a fault
// point (internal/fault) in a real daemon, instead of killing at a random
// moment: each is a path where a completed checkpoint could become
// unrestorable or committed output could be lost or written twice. The
// committed output is checked exactly once after every scenario.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
)

// setFault arms a fault point of p with gofail terms, e.g.
// `1*return("crash")`, through the process's fault control endpoint.
func (c *cluster) setFault(p *process, point, terms string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPut, "http://"+p.faults+"/"+point, strings.NewReader(terms))
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("arming %s=%s on %s: %v", point, terms, p.Name, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		c.t.Fatalf("arming %s=%s on %s: %s %s", point, terms, p.Name, resp.Status, body)
	}
}

// clearFault disarms a fault point of p; a process that is gone has none.
func (c *cluster) clearFault(p *process, point string) {
	req, _ := http.NewRequest(http.MethodDelete, "http://"+p.faults+"/"+point, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// faultCount is how many times a fault point of p fired, from the lines
// internal/fault logs when one does (gofail's own counter is read without
// the lock its writer holds, which the race detector reports).
func faultCount(p *process, point string) int {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "fault point fired") &&
			(strings.Contains(line, "fault_point="+point+" ") || strings.HasSuffix(line, "fault_point="+point) ||
				strings.Contains(line, `"fault_point":"`+point+`"`)) {
			n++
		}
	}
	return n
}

// exited reports whether p ended (a fault point crashed it).
func exited(p *process) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// faultSpec is the running-sum job with the given mode, retention and
// interval, restarting quickly and often.
func faultSpec(t *testing.T, c *cluster, count, keys, rate int, interval, mode string, retained int, extra string) (spec, out string) {
	out = filepath.Join(c.dir, "out")
	spec = writeSpec(t, c.dir, out, count, keys, rate, interval)
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "mode: exactly-once", "mode: "+mode, 1)
	s = strings.Replace(s, "retained: 3", fmt.Sprintf("retained: %d", retained), 1)
	s += "restart-strategy: {type: fixed-delay, attempts: 1000, delay: 100ms}\n" + extra
	if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, out
}

// superviseTaskManagers replaces every TaskManager a fault point crashed
// until the job ends, and returns the job's end and the number replaced.
func (c *cluster) superviseTaskManagers(id string, tms []*process, timeout time.Duration) (jobJSON, int) {
	c.t.Helper()
	replaced := 0
	var job jobJSON
	c.waitFor(timeout, "job "+id+" to end", func() (bool, error) {
		for i, p := range tms {
			if !p.Meant() && exited(p) {
				p.Ended()
				replaced++
				tms[i] = c.startTaskManager("taskmanager", fmt.Sprintf("tm-r%d", replaced))
			}
		}
		if err := c.weirJSON(&job, "job", "get", id); err != nil {
			return false, nil // a leader change or a busy JobManager
		}
		switch job.State {
		case "FINISHED", "FAILED", "CANCELED":
			return true, nil
		}
		return false, nil
	})
	return job, replaced
}

// skewThenCrash runs the running-sum job in mode with two faults set
// before it starts: the JobManager triggers the second source of the first
// checkpoint half a second after the first (jmBetweenTriggers), and each
// TaskManager crashes when its sinks are told a checkpoint completed
// (sinkBeforeCommit): the first crash comes when checkpoint 1 completed,
// so the job restores from checkpoint 1, the one with skewed barriers.
// Aligned (exactly-once) barriers make the skew harmless; the at-least-once
// tracker lets the first source's records after its barrier into the
// snapshot, and the restore replays them: duplicates, every time.
func skewThenCrash(t *testing.T, mode string) error {
	const count, keys, rate = 30000, 16, 3000
	c := startCluster(t, 3)
	spec, out := faultSpec(t, c, count, keys, rate, "100ms", mode, 1, "")
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
	if n := faultCount(c.procs[0], "jmBetweenTriggers"); n != 1 || replaced == 0 {
		t.Fatalf("the faults did not happen: skewed triggers %d, TaskManagers crashed %d", n, replaced)
	}
	t.Logf("%s: %d TaskManagers crashed on a commit, the first after the skewed checkpoint", mode, replaced)
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	return check.RunningSum(lines, count, keys)
}

// TestFaultCounterProof shows the checker bites, deterministically: the same
// faults that leave exactly-once output intact make at-least-once output
// fail the checker.
func TestFaultCounterProof(t *testing.T) {
	t.Parallel()
	t.Run("at-least-once", func(t *testing.T) {
		err := skewThenCrash(t, "at-least-once")
		if err == nil {
			t.Fatal("at-least-once output with a restore from a skewed checkpoint passed the checker: the counter-proof did not happen")
		}
		t.Logf("as expected, the checker rejects it: %v", err)
	})
	t.Run("exactly-once", func(t *testing.T) {
		if err := skewThenCrash(t, "exactly-once"); err != nil {
			t.Fatalf("exactly-once output: %v", err)
		}
	})
}

// TestFaultFailoverDuringFinalize: a subtask fails while the JobManager is
// writing checkpoint 1 (its _metadata is written, the store add is held
// back 3 s). The restart must not pick its restore point before that
// checkpoint landed in the store: restoring from scratch would abort the
// sinks' epoch-1 transactions that checkpoint 1, once stored, commits. The
// next finalizations then fail, so the job fails over again and restores
// from checkpoint 1 — which must still be whole.
func TestFaultFailoverDuringFinalize(t *testing.T) {
	t.Parallel()
	const count, keys, rate = 24000, 16, 2000
	c := startCluster(t, 3)
	spec, out := faultSpec(t, c, count, keys, rate, "200ms", "exactly-once", 1, "")
	c.setFault(c.procs[0], "jmAfterMetadataBeforeStore", `1*sleep(3000)->3*return("error")`)
	tms := append([]*process(nil), c.procs[1:]...)
	id := c.submit(spec)
	metadata := filepath.Join(c.checkpointDir(), id, "chk-1", "_metadata")
	c.waitForFast(time.Minute, "checkpoint 1's _metadata", func() (bool, error) {
		_, err := os.Stat(metadata)
		return err == nil, nil
	})
	c.kill(tms[0])
	tms[0] = c.startTaskManager("taskmanager", "tm-r0")
	job, _ := c.superviseTaskManagers(id, tms, 3*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if n := faultCount(c.procs[0], "jmAfterMetadataBeforeStore"); n != 4 {
		t.Fatalf("jmAfterMetadataBeforeStore fired %d times, want 4 (one delay, three errors)", n)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// TestFaultUnknownStoreOutcome: checkpoint 3 is in the store (which keeps
// one checkpoint, so 2 is gone from it) but the JobManager does not learn
// it (jmAfterStoreBeforeNotify fails). Its files must stay, and the job
// must recover from it: falling back to scratch would commit the output of
// checkpoints 1 and 2 a second time.
func TestFaultUnknownStoreOutcome(t *testing.T) {
	t.Parallel()
	const count, keys, rate = 20000, 16, 2000
	c := startCluster(t, 2)
	spec, out := faultSpec(t, c, count, keys, rate, "200ms", "exactly-once", 1, "")
	c.setFault(c.procs[0], "jmAfterStoreBeforeNotify", `2*off->1*return("error")`)
	id := c.submit(spec)
	job, _ := c.superviseTaskManagers(id, append([]*process(nil), c.procs[1:]...), 3*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	var cp checkpointsDetail
	if err := c.weirJSON(&cp, "checkpoint", "list", id); err != nil {
		t.Fatal(err)
	}
	if cp.Latest.Restored == nil || cp.Latest.Restored.ID < 3 {
		t.Errorf("latest restore %+v: want one from checkpoint 3 or later", cp.Latest.Restored)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// TestFaultStopWithSavepointThenCrash: stop-with-savepoint completes and the
// sinks commit on it, but one TaskManager crashes as its sinks are told
// (sinkBeforeCommit), before the job finished. The job restarts from the
// savepoint — the newest point any sink committed — not from scratch,
// which would commit the other sinks' output again; it then runs to the
// end of its input.
func TestFaultStopWithSavepointThenCrash(t *testing.T) {
	t.Parallel()
	const count, keys, rate = 20000, 16, 2000
	c := startCluster(t, 3)
	// No periodic checkpoint comes before the savepoint: its notification
	// is the first a sink gets, so the armed crash lands on it.
	spec, out := faultSpec(t, c, count, keys, rate, "1h", "exactly-once", 1, "")
	tms := append([]*process(nil), c.procs[1:]...)
	id := c.submit(spec)
	var job jobDetail
	c.waitFor(time.Minute, "every subtask running", func() (bool, error) {
		if err := c.weirJSON(&job, "job", "get", id); err != nil {
			return false, err
		}
		for _, v := range job.Vertices {
			for _, s := range v.Subtasks {
				if s.State != "RUNNING" {
					return false, nil
				}
			}
		}
		return job.State == "RUNNING", nil
	})
	// One TaskManager running a sink crashes; the other commits.
	sinkTM := job.Vertices[len(job.Vertices)-1].Subtasks[0].TaskManagerID
	var victim *process
	for i, p := range tms {
		if fmt.Sprintf("tm-%d", i) == sinkTM {
			victim = p
		}
	}
	if victim == nil {
		t.Fatalf("no process for TaskManager %s", sinkTM)
	}
	c.setFault(victim, "sinkBeforeCommit", `1*return("crash")`)
	// Let records flow into the savepoint's epoch.
	time.Sleep(2 * time.Second) // output to stop on, not a wait for a condition
	_, _ = c.weir("job", "stop", id, "--savepoint-dir", c.savepointDir())
	end, replaced := c.superviseTaskManagers(id, tms, 3*time.Minute)
	if end.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", end.State, end.FailureCause)
	}
	if replaced != 1 {
		t.Fatalf("%d TaskManagers crashed, want the one armed", replaced)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}
