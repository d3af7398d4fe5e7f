package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
)

type regionJobJSON struct {
	State             string  `json:"state"`
	Restarts          int     `json:"restarts"`
	Regions           int     `json:"regions"`
	RestartingRegions []int32 `json:"restarting_regions"`
	FailureCause      string  `json:"failure_cause"`
	Vertices          []struct {
		Name     string `json:"name"`
		Subtasks []struct {
			Attempt     int    `json:"attempt"`
			State       string `json:"state"`
			Region      int    `json:"region"`
			TaskManager string `json:"taskmanager_id"`
		} `json:"subtasks"`
	} `json:"vertices"`
}

// TestRegionFailover runs a job of two independent running-sum pipelines,
// each in its own slot-sharing group on its own single-slot TaskManager,
// and SIGKILLs the TaskManager running pipeline a. Only a's region
// restarts: b's subtasks keep attempt 0 and stay RUNNING at every look
// while a is down, and both outputs hold every running sum exactly once.
func TestRegionFailover(t *testing.T) {
	t.Parallel()
	const count, keys = 24000, 8
	c := &cluster{t: t, dir: t.TempDir(), jmAddr: freePort(t), jmHTTP: freePort(t), tmArgs: []string{"--slots", "1"}}
	startClusterProcs(c, 2, "taskmanager")
	outA, outB := filepath.Join(c.dir, "out-a"), filepath.Join(c.dir, "out-b")
	pipeline := func(p, out string) string {
		return fmt.Sprintf(`  - {name: %[1]s-source, operator: sequence-source, parallelism: 1, slot-sharing-group: %[1]s, config: {count: %[2]d, keys: %[3]d, rate: 2000}}
  - {name: %[1]s-sum, operator: keyed-sum, parallelism: 1, slot-sharing-group: %[1]s, inputs: [{from: %[1]s-source, partition: hash}]}
  - {name: %[1]s-sink, operator: file-sink, parallelism: 1, slot-sharing-group: %[1]s, inputs: [{from: %[1]s-sum, partition: forward}], config: {path: %[4]s}}
`, p, count, keys, strconv.Quote(out))
	}
	spec := "name: two-pipelines\n" +
		"checkpointing: {interval: 300ms, mode: exactly-once, timeout: 1m, retained: 3}\n" +
		"restart-strategy: {type: fixed-delay, attempts: 3, delay: 500ms}\n" +
		"vertices:\n" + pipeline("a", outA) + pipeline("b", outB)
	path := filepath.Join(c.dir, "job.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	idOut, err := c.weir("job", "submit", "-f", path)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(idOut))

	get := func() (regionJobJSON, error) {
		var j regionJobJSON
		return j, c.weirJSON(&j, "job", "get", id)
	}
	// Wait for two completed checkpoints, then find where a runs.
	c.waitFor(time.Minute, "two checkpoints", func() (bool, error) {
		var cps struct {
			Counts struct {
				Completed int `json:"completed"`
			} `json:"counts"`
		}
		if err := c.weirJSON(&cps, "checkpoint", "list", id); err != nil {
			return false, err
		}
		return cps.Counts.Completed >= 2, nil
	})
	job, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if job.Regions != 2 {
		t.Fatalf("job has %d regions, want 2", job.Regions)
	}
	tmOf := map[string]string{}
	regionOf := map[string]int{}
	for _, v := range job.Vertices {
		p := v.Name[:1]
		tmOf[p] = v.Subtasks[0].TaskManager
		regionOf[p] = v.Subtasks[0].Region
	}
	if tmOf["a"] == tmOf["b"] {
		t.Fatalf("both pipelines run on %s; their slot-sharing groups should keep them apart", tmOf["a"])
	}
	var victim *process
	for _, p := range c.procs {
		if p.Name == "taskmanager" && strings.Contains(strings.Join(p.args, " "), "--id "+tmOf["a"]) {
			victim = p
		}
	}
	if victim == nil {
		t.Fatalf("no TaskManager process for %s", tmOf["a"])
	}
	c.kill(victim)
	c.startTaskManager("taskmanager", "tm-replacement")

	// Until a runs again on a new attempt, b must run untouched at every
	// look.
	looks := 0
	c.waitFor(time.Minute, "pipeline a to run again", func() (bool, error) {
		j, err := get()
		if err != nil {
			return false, err
		}
		if j.State == "FINISHED" {
			return true, nil
		}
		looks++
		aBack := true
		for _, v := range j.Vertices {
			for _, st := range v.Subtasks {
				switch v.Name[:1] {
				case "b":
					if st.Attempt != 0 || st.State != "RUNNING" {
						return false, fmt.Errorf("pipeline b's %s is attempt %d %s while a fails over", v.Name, st.Attempt, st.State)
					}
				case "a":
					aBack = aBack && st.Attempt == 1 && st.State == "RUNNING"
				}
			}
		}
		if j.State != "RUNNING" {
			return false, fmt.Errorf("job is %s during a region failover", j.State)
		}
		return aBack, nil
	})
	t.Logf("pipeline b ran untouched at %d looks while a failed over", looks)

	final := c.waitJob(id, 2*time.Minute)
	if final.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", final.State, final.FailureCause)
	}
	if final.Restarts != 1 {
		t.Errorf("job restarted %d times, want 1", final.Restarts)
	}
	for name, out := range map[string]string{"a": outA, "b": outB} {
		lines, err := check.ReadCommitted(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := check.RunningSum(lines, count, keys); err != nil {
			t.Errorf("pipeline %s: %v", name, err)
		}
	}
	resp, err := http.Get("http://" + c.jmHTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`weir_job_region_restarts_total{job_id="%s",job_name="two-pipelines",region="%d"} 1`, id, regionOf["a"])
	if !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack %s", want)
	}
}

// TestLiveRescaleAndReconfigure rescales a running job 2→4→1 with weir job
// rescale (a checkpoint, then a restart at the new parallelism, in one
// step) and changes its checkpoint interval in place with weir checkpoint
// configure; the committed output holds every running sum exactly once, and
// the checkpoints triggered after the change are spaced by the new
// interval.
func TestLiveRescaleAndReconfigure(t *testing.T) {
	t.Parallel()
	// The input is bounded and its rate is per subtask (1000/s), so it must
	// outlast every step before the last rescale on a loaded machine: the
	// steps at parallelism 2 take some 6 s of its 30 s, the one at 4 some
	// 3 s of the 11 s left then, and the rest runs at 1.
	const count, keys = 60000, 16
	c := startCluster(t, 2) // 4 slots
	out := filepath.Join(c.dir, "out")
	id := c.submit(writeSpec(t, c.dir, out, count, keys, 1000, "300ms"))
	c.waitFor(time.Minute, "two checkpoints", func() (bool, error) {
		n, err := c.checkpointsCompleted(id)
		return n >= 2, err
	})

	rescale := func(p int) {
		t.Helper()
		n := strconv.Itoa(p)
		if _, err := c.weir("job", "rescale", id, "--parallelism", "source="+n, "--parallelism", "sum="+n, "--parallelism", "sink="+n); err != nil {
			t.Fatal(err)
		}
		c.waitFor(time.Minute, "job running at parallelism "+n, func() (bool, error) {
			j, err := c.regionJob(id)
			if err != nil || j.State != "RUNNING" {
				return false, err
			}
			for _, v := range j.Vertices {
				if len(v.Subtasks) != p {
					return false, nil
				}
				for _, st := range v.Subtasks {
					if st.State != "RUNNING" {
						return false, nil
					}
				}
			}
			return true, nil
		})
	}

	changed := time.Now()
	if _, err := c.weir("checkpoint", "configure", id, "--interval", "1s"); err != nil {
		t.Fatal(err)
	}
	// The change is in effect once the call returned (however long the
	// CLI took to start on a loaded machine): checkpoints triggered after
	// that follow the new interval.
	applied := time.Now()
	var triggers []int64
	c.waitFor(time.Minute, "two periodic checkpoints at the new interval", func() (bool, error) {
		var cps struct {
			History []struct {
				Trigger int64  `json:"trigger_timestamp"`
				Status  string `json:"status"`
			} `json:"history"`
		}
		if err := c.weirJSON(&cps, "checkpoint", "list", id); err != nil {
			return false, err
		}
		triggers = triggers[:0]
		for _, h := range cps.History {
			if h.Trigger > applied.UnixMilli() {
				triggers = append(triggers, h.Trigger)
			}
		}
		return len(triggers) >= 3, nil
	})
	slices.Sort(triggers)
	for i := 1; i < len(triggers); i++ {
		if gap := time.Duration(triggers[i]-triggers[i-1]) * time.Millisecond; gap < 900*time.Millisecond {
			t.Errorf("checkpoints triggered %v apart after the interval became 1s: %v", gap, triggers)
		}
	}
	t.Logf("after the change from 300ms to 1s, checkpoints triggered at +%v", relative(triggers, changed))

	rescale(4)
	before, err := c.checkpointsCompleted(id)
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(time.Minute, "a checkpoint at parallelism 4", func() (bool, error) {
		n, err := c.checkpointsCompleted(id)
		return n > before, err
	})

	rescale(1)
	job := c.waitJob(id, 2*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if job.Restarts != 0 {
		t.Errorf("rescales counted as %d restarts", job.Restarts)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) regionJob(id string) (regionJobJSON, error) {
	var j regionJobJSON
	return j, c.weirJSON(&j, "job", "get", id)
}

func relative(ms []int64, since time.Time) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = (time.Duration(m-since.UnixMilli()) * time.Millisecond).Round(10 * time.Millisecond)
	}
	return out
}
