package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/poll"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

var (
	chaosRounds = flag.Int("chaos.rounds", 3, "TaskManager kills in the chaos tests (make chaos runs many)")
	chaosSeed   = flag.Uint64("chaos.seed", 0, "seed of the chaos tests' choices (0: from the clock)")
)

// jobDetail is `weir job get -o json` with the subtasks.
type jobDetail struct {
	State    string `json:"state"`
	Cause    string `json:"failure_cause"`
	Restarts int    `json:"restarts"`
	Vertices []struct {
		Subtasks []struct {
			Attempt       int    `json:"attempt"`
			State         string `json:"state"`
			TaskManagerID string `json:"taskmanager_id"`
		} `json:"subtasks"`
	} `json:"vertices"`
}

type checkpointsDetail struct {
	Latest struct {
		Completed *struct {
			ID         int64  `json:"id"`
			LatestAck  int64  `json:"latest_ack_timestamp"`
			TriggerTs  int64  `json:"trigger_timestamp"`
			ExternalPt string `json:"external_path"`
		} `json:"completed"`
		Restored *struct {
			ID int64 `json:"id"`
		} `json:"restored"`
	} `json:"latest"`
}

// chaosRun runs the running-sum job on 1 JobManager and 3 TaskManagers,
// SIGKILLs a TaskManager running subtasks at a random moment, starts a
// replacement, waits for recovery, and repeats; then lets the bounded job
// finish and returns the committed output's checker verdict.
func chaosRun(t *testing.T, mode string, rounds int, seed uint64) error {
	const keys = 16
	const rate = 3000 // records/s per source subtask
	// Input for 5 s per round (two checkpoints, a random moment up to
	// 1.5 s, the kill and the recovery, the CLI calls between them on a
	// loaded machine) and 8 s more: a job that ends before the last round
	// fails the test.
	count := 2 * rate * (rounds*5 + 8)
	c := startCluster(t, 3)
	out := filepath.Join(c.dir, "out")
	spec := writeSpec(t, c.dir, out, count, keys, rate, "100ms")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	patched := strings.Replace(string(b), "mode: exactly-once", "mode: "+mode, 1)
	patched += "restart-strategy: {type: fixed-delay, attempts: 1000, delay: 100ms}\n"
	if err := os.WriteFile(spec, []byte(patched), 0o644); err != nil {
		t.Fatal(err)
	}
	if mode == "at-least-once" {
		// The second source's barrier follows the first's by 100 ms at
		// every checkpoint: records the first source sent after its
		// barrier reach the snapshots (the at-least-once tracker lets them
		// through), and a restore replays them. Without the skew whether a
		// random kill duplicates anything is up to chance.
		c.setFault(c.procs[0], "jmBetweenTriggers", "sleep(100)")
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	tms := map[string]*process{}
	for i, p := range c.procs[1:] {
		tms[fmt.Sprintf("tm-%d", i)] = p
	}
	id := c.submit(spec)
	api, ctx := c.client()
	var recoveries []time.Duration
	kills := 0
	for round := 1; round <= rounds; round++ {
		// Let at least two checkpoints complete since the last recovery, so
		// a restore has something to go back to, then wait a random moment
		// (checkpoints run every 100ms: kills land in alignments and between
		// acks and notifications).
		base := c.latestCompleted(id)
		c.waitFor(time.Minute, "two checkpoints", func() (bool, error) { return c.latestCompleted(id) >= base+2, nil })
		time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))) // the random kill moment itself
		var job jobDetail
		if err := c.weirJSON(&job, "job", "get", id); err != nil {
			t.Fatal(err)
		}
		if job.State != "RUNNING" {
			t.Logf("round %d: job is %s; no more kills", round, job.State)
			break
		}
		victims, attempt := busyTaskManagers(job)
		slices.Sort(victims)
		victim := victims[rng.IntN(len(victims))]
		killedAt := time.Now()
		c.kill(tms[victim])
		delete(tms, victim)
		kills++
		replacement := fmt.Sprintf("tm-r%d", round)
		tms[replacement] = c.startTaskManager("taskmanager", replacement)

		// Recovery: every subtask runs a newer attempt, then a checkpoint
		// taken after the restore completes. Polled over gRPC, not the CLI,
		// so the measurement is not the CLI's start-up time.
		var running time.Time
		c.waitForFast(2*time.Minute, "subtasks running again", func() (bool, error) {
			info, err := api.GetJob(ctx, &weirv1.GetJobRequest{JobId: id})
			if err != nil {
				return false, err
			}
			j := info.GetJob()
			switch j.GetState() {
			case weirv1.JobState_JOB_STATE_FAILED:
				return false, fmt.Errorf("job failed: %s", j.GetFailureCause())
			case weirv1.JobState_JOB_STATE_FINISHED:
				return true, nil
			case weirv1.JobState_JOB_STATE_RUNNING:
			default:
				return false, nil
			}
			for _, v := range j.GetVertices() {
				for _, st := range v.GetSubtasks() {
					if int(st.GetAttempt()) <= attempt || st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING {
						return false, nil
					}
				}
			}
			running = time.Now()
			return true, nil
		})
		var recovered time.Duration
		c.waitForFast(2*time.Minute, "a checkpoint after the restore", func() (bool, error) {
			if running.IsZero() {
				return true, nil // the job finished meanwhile
			}
			cp, err := api.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: id})
			if err != nil {
				return false, err
			}
			done, restored := cp.GetLatestCompleted(), cp.GetLatestRestored()
			if done == nil || restored == nil || done.GetId() <= restored.GetId() || done.GetTriggerTimestampMs() < running.UnixMilli() {
				return false, nil
			}
			recovered = time.UnixMilli(done.GetLatestAckTimestampMs()).Sub(killedAt)
			return true, nil
		})
		if recovered > 0 {
			recoveries = append(recoveries, recovered)
			t.Logf("round %d: killed %s; subtasks running after %v, first checkpoint after restore completed after %v",
				round, victim, running.Sub(killedAt).Round(time.Millisecond), recovered.Round(time.Millisecond))
		}
	}
	job := c.waitJob(id, 5*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if len(recoveries) > 0 {
		slices.Sort(recoveries)
		t.Logf("%s: %d kills, recovery (kill → first checkpoint after restore) median %v, max %v", mode, kills,
			recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond))
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	return check.RunningSum(lines, int64(count), keys)
}

// busyTaskManagers lists the TaskManagers running subtasks and the lowest
// attempt number among the subtasks.
func busyTaskManagers(j jobDetail) ([]string, int) {
	seen := map[string]bool{}
	var tms []string
	attempt := -1
	for _, v := range j.Vertices {
		for _, s := range v.Subtasks {
			if !seen[s.TaskManagerID] {
				seen[s.TaskManagerID] = true
				tms = append(tms, s.TaskManagerID)
			}
			if attempt < 0 || s.Attempt < attempt {
				attempt = s.Attempt
			}
		}
	}
	return tms, attempt
}

func (c *cluster) latestCompleted(id string) int64 {
	var cp checkpointsDetail
	if err := c.weirJSON(&cp, "checkpoint", "list", id); err != nil || cp.Latest.Completed == nil {
		return 0
	}
	return cp.Latest.Completed.ID
}

func seed(t *testing.T) uint64 {
	s := *chaosSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (rerun with -chaos.seed=%d)", s, s)
	return s
}

// TestChaosExactlyOnce kills TaskManagers under a running job: the
// committed output must still hold every record exactly once.
func TestChaosExactlyOnce(t *testing.T) {
	t.Parallel()
	if err := chaosRun(t, "exactly-once", *chaosRounds, seed(t)); err != nil {
		t.Fatalf("exactly-once run: %v", err)
	}
}

// TestChaosAtLeastOnceDuplicates is the checker's counter-proof: the same
// chaos in at-least-once mode restores snapshots that already counted
// records the sources replay, so the checker must report duplicates.
func TestChaosAtLeastOnceDuplicates(t *testing.T) {
	t.Parallel()
	err := chaosRun(t, "at-least-once", max(2, *chaosRounds/2), seed(t))
	if err == nil {
		t.Fatal("at-least-once chaos produced exactly-once output: the checker's counter-proof did not happen")
	}
	t.Logf("as expected, the checker rejects the at-least-once output: %v", err)
}

// client is a gRPC client of the JobManager for measurements that the
// CLI's process start-up would blur.
func (c *cluster) client() (weirv1grpc.ClientServiceClient, context.Context) {
	conn, err := grpc.NewClient(c.jmAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return weirv1grpc.NewClientServiceClient(conn), context.Background()
}

// waitForFast is waitFor polling every 10ms.
func (c *cluster) waitForFast(timeout time.Duration, what string, cond func() (bool, error)) {
	c.t.Helper()
	poll.UntilNoError(c.t, timeout, 10*time.Millisecond, what, cond)
}
