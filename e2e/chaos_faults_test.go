package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/fault"
)

var chaosFaultRounds = flag.Int("chaos.faults", len(fault.Points)+1, "fault-point rounds of TestChaosFaultPoints (make chaos runs many)")

// jmPoints are the fault points of the JobManager; the others are the
// TaskManagers'.
var jmPoints = map[string]bool{
	fault.JMBetweenTriggers: true, fault.JMAfterMetadataBeforeStore: true, fault.JMAfterStoreBeforeNotify: true,
}

// pointStats is what one fault point did over a chaos run.
type pointStats struct {
	armed, crashed, failed, notReached int
	recoveries                         []time.Duration
}

// TestChaosFaultPoints is chaos that picks the step instead of the moment:
// every round arms one fault point (in turn, so every point gets its
// share) on the process that meets it — the leading JobManager or a
// TaskManager running subtasks — to crash it or to fail that step once,
// waits until it fired, replaces a crashed process, and waits until the job
// completed a checkpoint again. A restore's download is reached by killing
// another TaskManager. The job runs on two JobManagers in etcd HA and three
// TaskManagers with incremental Pebble state; its committed output must
// hold every record exactly once.
func TestChaosFaultPoints(t *testing.T) {
	t.Parallel()
	rounds := *chaosFaultRounds
	rng := rand.New(rand.NewPCG(seed(t), 1))
	h := startHACluster(t, 2, 3)
	const keys, rate = 16, 2000
	count := 2 * rate * (rounds*6 + 10)
	spec, out := faultSpec(t, h.cluster, count, keys, rate, "200ms", "exactly-once", 2,
		"state: {backend: pebble, incremental: true}\n")
	id := h.submit(spec)

	tms := map[string]*process{} // TaskManager ID → process
	for i, p := range h.tms {
		tms[fmt.Sprintf("tm-%d", i)] = p
	}
	replacements := 0
	// revive replaces every process a fault point (or the test) ended.
	revive := func() {
		for addr, p := range h.jms {
			if exited(p) {
				p.Ended()
				h.jms[addr] = h.startEnv(p.Name, p.env, p.args...)
			}
		}
		for tmID, p := range tms {
			if exited(p) {
				p.Ended()
				delete(tms, tmID)
				replacements++
				name := fmt.Sprintf("tm-r%d", replacements)
				tms[name] = h.startTaskManager("taskmanager", name)
			}
		}
	}
	busy := func() []string {
		var job jobDetail
		if err := h.weirJSON(&job, "job", "get", id); err != nil {
			return nil
		}
		ids, _ := busyTaskManagers(job)
		var live []string
		for _, tmID := range ids {
			if p := tms[tmID]; p != nil && !exited(p) {
				live = append(live, tmID)
			}
		}
		slices.Sort(live)
		return live
	}

	stats := map[string]*pointStats{}
	for _, p := range fault.Points {
		stats[p] = &pointStats{}
	}
	for round := 1; round <= rounds; round++ {
		base := h.latestCompleted(id)
		h.waitFor(2*time.Minute, "a checkpoint", func() (bool, error) {
			revive()
			return h.latestCompleted(id) > base || h.jobState(id) == "FINISHED", nil
		})
		if st := h.jobState(id); st != "RUNNING" {
			t.Logf("round %d: job is %s; no more faults", round, st)
			break
		}
		point := fault.Points[(round-1)%len(fault.Points)]
		action := "crash"
		if rng.IntN(3) == 0 {
			action = "error"
		}
		var target *process
		targetName := ""
		if jmPoints[point] {
			targetName, target = h.leader()
		} else if ids := busy(); len(ids) > 0 {
			targetName = ids[rng.IntN(len(ids))]
			target = tms[targetName]
		}
		if target == nil {
			t.Logf("round %d: no process to arm %s on; skipped", round, point)
			continue
		}
		s := stats[point]
		s.armed++
		h.setFault(target, point, fmt.Sprintf(`1*return(%q)`, action))
		if point == fault.RestoreDownload {
			// A restore is what reads state back: fail another subtask.
			for _, other := range busy() {
				if other != targetName {
					h.kill(tms[other])
					break
				}
			}
		}
		var firedAt time.Time
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if (action == "crash" && exited(target)) || (action == "error" && faultCount(target, point) >= 1) {
				firedAt = time.Now()
				break
			}
			time.Sleep(10 * time.Millisecond) // polling the process, the only way to see a fault fire
		}
		if firedAt.IsZero() {
			h.clearFault(target, point)
			s.notReached++
			t.Logf("round %d: %s=%s on %s not reached in 30s", round, point, action, targetName)
			revive()
			continue
		}
		if action == "crash" {
			s.crashed++
		} else {
			s.failed++
		}
		revive()
		var recovered time.Duration
		h.waitFor(3*time.Minute, "a checkpoint after the fault", func() (bool, error) {
			revive()
			var cp checkpointsDetail
			if err := h.weirJSON(&cp, "checkpoint", "list", id); err != nil {
				return false, nil // no leader yet
			}
			if c := cp.Latest.Completed; c != nil && c.TriggerTs > firedAt.UnixMilli() {
				recovered = time.UnixMilli(c.LatestAck).Sub(firedAt)
				return true, nil
			}
			return h.jobState(id) == "FINISHED", nil
		})
		if recovered > 0 {
			s.recoveries = append(s.recoveries, recovered)
		}
		t.Logf("round %d: %s=%s on %s; a checkpoint completed %v later", round, point, action, targetName, recovered.Round(time.Millisecond))
	}

	var job jobJSON
	h.waitFor(10*time.Minute, "job "+id+" to end", func() (bool, error) {
		revive()
		if err := h.weirJSON(&job, "job", "get", id); err != nil {
			return false, nil
		}
		return job.State == "FINISHED" || job.State == "FAILED" || job.State == "CANCELED", nil
	})
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %5s %7s %6s %11s %9s %9s\n", "fault point", "armed", "crashed", "failed", "not reached", "rec. p50", "rec. max")
	for _, p := range fault.Points {
		s := stats[p]
		p50, pmax := "-", "-"
		if n := len(s.recoveries); n > 0 {
			sort.Slice(s.recoveries, func(i, j int) bool { return s.recoveries[i] < s.recoveries[j] })
			p50, pmax = s.recoveries[n/2].Round(time.Millisecond).String(), s.recoveries[n-1].Round(time.Millisecond).String()
		}
		fmt.Fprintf(&table, "%-28s %5d %7d %6d %11d %9s %9s\n", p, s.armed, s.crashed, s.failed, s.notReached, p50, pmax)
	}
	t.Logf("fault-point chaos, %d rounds:\n%s", rounds, table.String())
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, int64(count), keys); err != nil {
		t.Fatalf("exactly-once check: %v", err)
	}
	t.Logf("exactly-once check passed: %d committed lines", len(lines))
}

// jobState is the job's state as the CLI shows it ("" when unknown).
func (c *cluster) jobState(id string) string {
	var job jobJSON
	if err := c.weirJSON(&job, "job", "get", id); err != nil {
		return ""
	}
	return job.State
}
